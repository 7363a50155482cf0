//! The `[instances]` table: the Node and NodeInstance lifecycle of the provisioning runbook (seed 004) on the cloud
//! provider fake — its plain nodes, its pools, the approval governance and whether the on-call follows the runbook's
//! recoveries by itself (`docs/instances.md`, `docs/formats.md`).

use engine::instance::approval::{Governance, Policy};
use engine::instance::pool::{LifecycleClass, ReleaseDisposition};
use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::{Source, SpecError};

/// The one region the simulated provider serves, and its instance type.
pub const REGION: &str = "region-local";
pub const INSTANCE_TYPE: &str = "type-small";
/// The account every node is created in, and the template its modules come from.
pub const ACCOUNT: &str = "acme";
pub const TEMPLATE: &str = "t-edge";
/// The most plain nodes, pools and pool members one run may have.
pub const PLAIN_MAX: u32 = 500;
pub const POOLS_MAX: usize = 8;
pub const POOL_SIZE_MAX: u32 = 200;
/// The provider's default per-region quota of live VMs.
pub const DEFAULT_QUOTA: u32 = 64;
pub const QUOTA_MAX: u32 = 10_000;
/// A pool's ready TTL: at least a replenisher period, at most a day.
pub const READY_TTL_MIN_S: u64 = 60;
pub const READY_TTL_MAX_S: u64 = 86_400;

/// The plain node names: `vm-01` … (zero-padded to the width of the count, at least two digits).
pub fn plain_node_name(plain: u32, index: u32) -> String {
    let width = plain.to_string().len().max(2);
    format!("vm-{index:0width$}")
}

/// One pool of the `[instances]` table, resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolSpec {
    pub name: String,
    pub class: LifecycleClass,
    pub target: u32,
    pub max: u32,
    pub ready_ttl_s: u64,
    pub disposition: ReleaseDisposition,
}

/// The `[instances]` table, resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstancesSpec {
    /// Plain nodes (`vm-01` …), each provisioned at the start under the operation id `op-<node>`.
    pub plain: u32,
    pub pools: Vec<PoolSpec>,
    pub quota: u32,
    pub governance: Governance,
    /// The on-call follows the runbook's recovery of every stuck row by itself; off, only the scenario's
    /// `instance_operator` steps act.
    pub on_call: bool,
    /// Every machine of the `[onboarding]` site is a Node with a bare-metal instance, provisioned by its onboarding
    /// workflow and terminated by its decommission workflow (absent from the configuration when false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub bare_metal: bool,
}

impl InstancesSpec {
    pub fn plain_names(&self) -> Vec<String> {
        (1..=self.plain).map(|index| plain_node_name(self.plain, index)).collect()
    }

    pub fn has_pool(&self, name: &str) -> bool {
        self.pools.iter().any(|pool| pool.name == name)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct InstancesFile {
    #[serde(default)]
    plain: Option<Spanned<u32>>,
    #[serde(default)]
    pool: Vec<Spanned<PoolFile>>,
    quota: Option<Spanned<u32>>,
    governance: Option<GovernanceFile>,
    on_call: Option<bool>,
    bare_metal: Option<Spanned<bool>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PoolFile {
    name: String,
    class: LifecycleClass,
    target: u32,
    max: Option<u32>,
    ready_ttl_s: Option<u64>,
    disposition: Option<ReleaseDisposition>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GovernanceFile {
    instance_cordon: Option<Policy>,
    terminate: Option<Policy>,
}

/// Resolves the table: every count within its bound, pool names unique and well-formed, `target <= max`, and
/// `bare_metal` only over a site (`has_site`: the file has an `[onboarding]` table).
pub(crate) fn resolve_instances(
    source: &Source,
    file: Option<&Spanned<InstancesFile>>,
    has_site: bool,
) -> Result<Option<InstancesSpec>, SpecError> {
    let Some(file) = file else { return Ok(None) };
    let table = file.get_ref();
    let plain = table.plain.as_ref().map_or(0, |plain| *plain.get_ref());
    if plain > PLAIN_MAX {
        let span = table.plain.as_ref().map(Spanned::span);
        return Err(source.error_at(span, format!("instances.plain: must be 0 to {PLAIN_MAX}, not {plain}")));
    }
    if table.pool.len() > POOLS_MAX {
        return Err(source.error_at(Some(file.span()), format!("instances.pool: at most {POOLS_MAX} pools")));
    }
    let mut pools: Vec<PoolSpec> = Vec::new();
    for (index, spanned) in table.pool.iter().enumerate() {
        let pool = spanned.get_ref();
        let key = format!("instances.pool[{index}]");
        let fail = |message: String| Err(source.error_at(Some(spanned.span()), format!("{key}.{message}")));
        let well_formed = !pool.name.is_empty()
            && pool.name.len() <= 32
            && pool.name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !pool.name.starts_with("vm-")
            && !pool.name.starts_with("i-")
            && !pool.name.starts_with("d-");
        if !well_formed {
            return fail(format!(
                "name: \"{}\" must be 1 to 32 of a-z, 0-9 and -, not starting vm-, i- or d-",
                pool.name
            ));
        }
        if pools.iter().any(|other| other.name == pool.name) {
            return fail(format!("name: \"{}\" is another pool's name", pool.name));
        }
        let max = pool.max.unwrap_or(pool.target);
        if pool.target == 0 || max > POOL_SIZE_MAX || pool.target > max {
            return fail(format!("target: must be 1 to max ({max}), and max at most {POOL_SIZE_MAX}"));
        }
        let ready_ttl_s = pool.ready_ttl_s.unwrap_or(3_600);
        if !(READY_TTL_MIN_S..=READY_TTL_MAX_S).contains(&ready_ttl_s) {
            return fail(format!("ready_ttl_s: must be {READY_TTL_MIN_S} to {READY_TTL_MAX_S}, not {ready_ttl_s}"));
        }
        pools.push(PoolSpec {
            name: pool.name.clone(),
            class: pool.class,
            target: pool.target,
            max,
            ready_ttl_s,
            disposition: pool.disposition.unwrap_or(ReleaseDisposition::Recycled),
        });
    }
    let quota = match &table.quota {
        None => DEFAULT_QUOTA,
        Some(quota) if (1..=QUOTA_MAX).contains(quota.get_ref()) => *quota.get_ref(),
        Some(quota) => {
            return Err(source.error_at(
                Some(quota.span()),
                format!("instances.quota: must be 1 to {QUOTA_MAX}, not {}", quota.get_ref()),
            ));
        }
    };
    let bare_metal = table.bare_metal.as_ref().is_some_and(|flag| *flag.get_ref());
    if bare_metal && !has_site {
        let span = table.bare_metal.as_ref().map(Spanned::span);
        return Err(source.error_at(
            span,
            "instances.bare_metal: the site's machines back the instances, which needs an [onboarding] table",
        ));
    }
    if plain == 0 && pools.is_empty() && !bare_metal {
        return Err(source.error_at(Some(file.span()), "instances: needs plain nodes, a pool or bare_metal = true"));
    }
    let default = Governance::default();
    let governance = table.governance.as_ref().map_or(default, |file| Governance {
        instance_cordon: file.instance_cordon.unwrap_or(default.instance_cordon),
        terminate: file.terminate.unwrap_or(default.terminate),
    });
    Ok(Some(InstancesSpec { plain, pools, quota, governance, on_call: table.on_call.unwrap_or(true), bare_metal }))
}

#[cfg(test)]
mod tests {
    use crate::model::spec::parse_scenario;

    const BASE: &str = r#"
schema_version = 1
description = "instances"
seed = 3
duration_ms_max = 1_000_000

[fleet]
nodes = 1
"#;

    fn err(text: &str) -> String {
        parse_scenario("s.toml", &format!("{BASE}{text}")).unwrap_err().to_string()
    }

    #[test]
    fn the_table_resolves_with_its_defaults() {
        let text = format!(
            "{BASE}\n[instances]\nplain = 12\n\n[[instances.pool]]\nname = \"edge\"\nclass = \"spot\"\ntarget = 2\n"
        );
        let spec = parse_scenario("s.toml", &text).unwrap().run.instances.unwrap();
        assert_eq!(spec.plain_names().first().map(String::as_str), Some("vm-01"));
        assert_eq!(spec.plain_names().last().map(String::as_str), Some("vm-12"));
        assert_eq!((spec.quota, spec.on_call), (super::DEFAULT_QUOTA, true));
        assert_eq!(spec.governance, engine::instance::approval::Governance::default());
        let pool = &spec.pools[0];
        assert_eq!((pool.max, pool.ready_ttl_s), (2, 3_600));
        assert_eq!(pool.disposition, engine::instance::pool::ReleaseDisposition::Recycled);
        assert!(parse_scenario("s.toml", BASE).unwrap().run.instances.is_none(), "absent: nothing of it exists");
    }

    #[test]
    fn bad_tables_name_the_file_line_and_key() {
        let table = "\n[instances]\nplain = 1\n";
        let pool = |fields: &str| format!("{table}\n[[instances.pool]]\n{fields}\n");
        let cases = [
            ("\n[instances]\n".to_owned(), "instances: needs plain nodes, a pool or bare_metal = true"),
            (
                "\n[instances]\nplain = 1\nbare_metal = true\n".to_owned(),
                "s.toml:12:14: instances.bare_metal: the site's machines back the instances, which needs an [onboarding] table",
            ),
            ("\n[instances]\nplain = 501\n".to_owned(), "instances.plain: must be 0 to 500, not 501"),
            ("\n[instances]\nplain = 1\nquota = 0\n".to_owned(), "instances.quota: must be 1 to 10000, not 0"),
            ("\n[instances]\nplain = 1\nwhatever = 1\n".to_owned(), "unknown field `whatever`"),
            (pool("name = \"Edge\"\nclass = \"spot\"\ntarget = 1"), "instances.pool[0].name: \"Edge\" must be"),
            (pool("name = \"vm-x\"\nclass = \"spot\"\ntarget = 1"), "not starting vm-, i- or d-"),
            (
                pool("name = \"e\"\nclass = \"spot\"\ntarget = 3\nmax = 2"),
                "instances.pool[0].target: must be 1 to max (2)",
            ),
            (pool("name = \"e\"\nclass = \"spot\"\ntarget = 1\nready_ttl_s = 5"), "ready_ttl_s: must be 60 to 86400"),
            (pool("name = \"e\"\nclass = \"persistent\"\ntarget = 1"), "unknown variant `persistent`"),
        ];
        for (text, expected) in cases {
            let error = err(&text);
            assert!(error.starts_with("s.toml:"), "{error}");
            assert!(error.contains(expected), "{expected:?} not in {error}");
        }
        let twice = format!(
            "{}\n[[instances.pool]]\nname = \"e\"\nclass = \"spot\"\ntarget = 1\n",
            pool("name = \"e\"\nclass = \"spot\"\ntarget = 1")
        );
        assert!(err(&twice).contains("\"e\" is another pool's name"), "{}", err(&twice));
    }

    #[test]
    fn a_bare_metal_table_takes_the_site_s_machines_and_refuses_a_decommission_step() {
        let site = "\n[onboarding]\nnodes = 2\n\n[instances]\nbare_metal = true\n";
        let spec = parse_scenario("s.toml", &format!("{BASE}{site}")).unwrap().run;
        assert!(spec.instances.as_ref().is_some_and(|instances| instances.bare_metal && instances.plain == 0));
        let step = "\n[[step]]\nat_ms = 10\nkind = \"decommission\"\ntarget = \"node-02\"\n";
        let error = err(&format!("{site}{step}"));
        assert!(error.starts_with("s.toml:"), "{error}");
        assert!(error.contains("in a bare-metal run node-02 is decommissioned by terminating its instance"), "{error}");
        let without = parse_scenario("s.toml", &format!("{BASE}\n[onboarding]\nnodes = 2\n{step}"));
        assert!(without.is_ok(), "a site run without bare_metal keeps its decommission step");
    }

    #[test]
    fn instance_steps_need_the_table_and_name_what_they_act_on() {
        let step = |fields: &str| format!("\n[[step]]\nat_ms = 10\n{fields}\n");
        let without = err(&step("kind = \"provider_fault\"\nfault = \"hang_create\"\ncount = 1"));
        assert!(without.contains("acts on the instance lifecycle, which needs an [instances] table"), "{without}");
        let death = err(&step("kind = \"controller_death\"\npoint = \"after_intent\"\nsubsystem = \"instances\""));
        assert!(death.contains("instances needs an [instances] table"), "{death}");
        let table = "\n[instances]\nplain = 1\n";
        let with = |fields: &str| err(&format!("{table}{}", step(fields)));
        let acquire = with("kind = \"instance_operator\"\nop = \"acquire\"\ntarget = \"nope\"");
        assert!(acquire.contains("\"nope\" is not a pool of the [instances] table"), "{acquire}");
        let blank = with("kind = \"instance_operator\"\nop = \"stop\"\ntarget = \" \"");
        assert!(blank.contains(".target: names no node"), "{blank}");
        let op_id = with("kind = \"instance_operator\"\nop = \"stop\"\ntarget = \"vm-01\"\noperation_id = \"x\"");
        assert!(op_id.contains("operation_id: only a provision takes one"), "{op_id}");
        let secret =
            with("kind = \"instance_operator\"\nop = \"cordon\"\ntarget = \"vm-01\"\nreason = \"fleetsim-secret-x\"");
        assert!(secret.contains("holds a credential"), "{secret}");
        let count = with("kind = \"provider_answer_lost\"\ncount = 1001");
        assert!(count.contains("count: must be 0 to 1000"), "{count}");
        let ok = format!("{BASE}{table}{}", step("kind = \"instance_operator\"\nop = \"cordon\"\ntarget = \"vm-01\""));
        assert!(parse_scenario("s.toml", &ok).is_ok(), "a blank reason is the engine's to refuse");
    }
}
