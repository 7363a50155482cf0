//! `GET /MAAS/api/2.0/describe/`: the API's description of itself, which MAAS's own clients read before anything else
//! (python-libmaas's `connect`, the `maas login` CLI build their handlers and actions from it).
//!
//! Real MAAS generates it from every handler (`src/maasserver/api/doc.py` `describe_api`); the fake describes the
//! handlers it serves, with the actions it serves, in the same shape: `{"doc", "hash", "resources": [{"name",
//! "anon", "auth": {"name", "doc", "path", "uri", "params", "actions": [{"name", "method", "op", "restful",
//! "doc"}]}}]}`. Deviation: fewer handlers and actions than real MAAS, and no action docstrings.

use serde_json::{Value, json};

use super::maas::{API_HASH, API_PREFIX};

/// `(handler name, path under the API prefix with `{param}`s, params, actions: (name, method, op))`.
type Handler = (
    &'static str,
    &'static str,
    &'static [&'static str],
    &'static [(&'static str, &'static str, Option<&'static str>)],
);

const HANDLERS: &[Handler] = &[
    ("VersionHandler", "version/", &[], &[("read", "GET", None)]),
    (
        "MachinesHandler",
        "machines/",
        &[],
        &[("read", "GET", None), ("create", "POST", None), ("power_parameters", "GET", Some("power_parameters"))],
    ),
    (
        "MachineHandler",
        "machines/{system_id}/",
        &["system_id"],
        &[
            ("read", "GET", None),
            ("update", "PUT", None),
            ("delete", "DELETE", None),
            ("commission", "POST", Some("commission")),
            ("deploy", "POST", Some("deploy")),
            ("release", "POST", Some("release")),
            ("abort", "POST", Some("abort")),
            ("mark_broken", "POST", Some("mark_broken")),
            ("mark_fixed", "POST", Some("mark_fixed")),
            ("power_on", "POST", Some("power_on")),
            ("power_off", "POST", Some("power_off")),
            ("query_power_state", "GET", Some("query_power_state")),
            ("power_parameters", "GET", Some("power_parameters")),
        ],
    ),
    ("InterfacesHandler", "nodes/{system_id}/interfaces/", &["system_id"], &[("read", "GET", None)]),
    (
        "InterfaceHandler",
        "nodes/{system_id}/interfaces/{id}/",
        &["system_id", "id"],
        &[("link_subnet", "POST", Some("link_subnet")), ("disconnect", "POST", Some("disconnect"))],
    ),
    ("BlockDevicesHandler", "nodes/{system_id}/blockdevices/", &["system_id"], &[("read", "GET", None)]),
    (
        "BlockDeviceHandler",
        "nodes/{system_id}/blockdevices/{id}/",
        &["system_id", "id"],
        &[("set_boot_disk", "POST", Some("set_boot_disk"))],
    ),
    ("SubnetsHandler", "subnets/", &[], &[("read", "GET", None)]),
    ("SubnetHandler", "subnets/{id}/", &["id"], &[("read", "GET", None)]),
    ("VlanHandler", "vlans/{id}/", &["id"], &[("read", "GET", None), ("update", "PUT", None)]),
    ("EventsHandler", "events/", &[], &[("query", "GET", Some("query"))]),
];

/// The description, with absolute `uri`s on `origin` (`http://host:port`, from the request's `Host`).
pub fn describe(origin: &str) -> Value {
    let resources: Vec<Value> = HANDLERS
        .iter()
        .map(|(name, path, params, actions)| {
            let path = format!("{API_PREFIX}{path}");
            let actions: Vec<Value> = actions
                .iter()
                .map(|(action, method, op)| {
                    json!({"name": action, "method": method, "op": op, "restful": op.is_none(), "doc": ""})
                })
                .collect();
            json!({
                "name": name,
                "anon": null,
                "auth": {
                    "name": name,
                    "doc": "",
                    "path": path,
                    "uri": format!("{origin}{path}"),
                    "params": params,
                    "actions": actions,
                },
            })
        })
        .collect();
    json!({ "doc": "MAAS API (fleetsim fake)", "hash": API_HASH, "resources": resources, "handlers": [] })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_handler_has_an_absolute_uri_and_its_params_in_the_path() {
        let description = describe("http://127.0.0.1:5240");
        let resources = description["resources"].as_array().unwrap();
        assert_eq!(resources.len(), HANDLERS.len());
        for resource in resources {
            let auth = &resource["auth"];
            let uri = auth["uri"].as_str().unwrap();
            assert!(uri.starts_with("http://127.0.0.1:5240/MAAS/api/2.0/"), "{uri}");
            for param in auth["params"].as_array().unwrap() {
                assert!(uri.contains(&format!("{{{}}}", param.as_str().unwrap())), "{uri} lacks {param}");
            }
            for action in auth["actions"].as_array().unwrap() {
                assert_eq!(action["restful"].as_bool().unwrap(), action["op"].is_null());
            }
        }
    }
}
