"""Runs the examples of docs/serve.md's "The services" section as written against a fresh `fleetsim serve`.

Each fenced `sh` block runs in bash (errexit, pipefail; the variables earlier blocks set are set again first, as
in the one shell a reader types them into) and each `python` block in the clients' virtual environment,
in document order. Only the placeholders a reader fills in are filled in: `<the printed API key>`, `<pxe mac>` and
`<gpu-02's pxe mac>` (from /admin/state), `<password>` and `<gpu-02's password>` (the BMC logins, from the secrets
store), `<token>` (the printed secrets token) and `<the printed provider token>`; and since the site runs on ephemeral ports, the documented ports 5240-5245 become the served ones. A
block that fails, prints nothing, or whose `# REFUSED` / `# Commissioning` comment is not borne out fails the run.

usage: serve_docs.py FLEETSIM DOCS_MD
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.request


def fenced_blocks(text):
    """(language, body) of every fenced block in `text`, in order."""
    return [(m.group(1), m.group(2)) for m in re.finditer(r"```(\w+)\n(.*?)```", text, re.S)]


def section(text, title):
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def main():
    fleetsim, docs = sys.argv[1], sys.argv[2]
    services = section(open(docs, encoding="utf-8").read(), "The services")
    blocks = [(lang, body) for lang, body in fenced_blocks(services) if lang in ("sh", "python")]
    if len(blocks) < 4:
        sys.exit(f"{docs}: expected the curl, python-libmaas, Redfish and dig examples, found {len(blocks)} blocks")
    site = tempfile.mkdtemp()
    stderr = open(os.path.join(site, "stderr"), "w")
    serve = subprocess.Popen(
        [fleetsim, "serve", "--port", "0", "--speed", "60", "--machines", "3", "--write-site", site],
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
    )
    try:
        # The banner ends with "Ctrl-C stops."; a serve that exits first ends the pipe.
        lines = []
        for line in serve.stdout:
            lines.append(line)
            if line.startswith("Ctrl-C stops"):
                break
        else:
            sys.exit("fleetsim serve exited before its banner: " + open(os.path.join(site, "stderr")).read())
        banner = "".join(lines)
        ports = {
            name: re.search(rf"^  {name} +\w+://127\.0\.0\.1:(\d+)", banner, re.M).group(1)
            for name in ("MAAS", "Redfish", "secrets", "hub", "DNS", "admin")
        }
        documented = {"MAAS": 5240, "Redfish": 5241, "secrets": 5242, "hub": 5243, "DNS": 5244, "admin": 5245}
        read = lambda name: open(os.path.join(site, name)).read().strip()
        state = json.load(urllib.request.urlopen(f"http://127.0.0.1:{ports['admin']}/admin/state"))
        request = urllib.request.Request(
            f"http://127.0.0.1:{ports['secrets']}/v1/secret/data/power/gpu-01",
            headers={"X-Vault-Token": read("secrets-token")},
        )
        login = json.load(urllib.request.urlopen(request))["data"]["data"]
        request = urllib.request.Request(
            f"http://127.0.0.1:{ports['secrets']}/v1/secret/data/power/gpu-02",
            headers={"X-Vault-Token": read("secrets-token")},
        )
        second = json.load(urllib.request.urlopen(request))["data"]["data"]
        fills = {
            "<the printed API key>": read("maas-api-key"),
            "<pxe mac>": state["machines"][0]["pxe_mac"],
            "<password>": login["password"],
            "<gpu-02's pxe mac>": state["machines"][1]["pxe_mac"],
            "<gpu-02's password>": second["password"],
            "<token>": read("secrets-token"),
            "<the printed provider token>": read("provider-token"),
        }
        python = os.path.join(os.path.dirname(sys.executable), "python")
        # A reader runs the sh examples in one shell: the variables an earlier block sets (`KEY=...`, `IFS=: read
        # ...`, `AUTH=...`) are set again before each later one, and nothing else of it runs twice.
        assignments = []
        for index, (lang, body) in enumerate(blocks, 1):
            text = body
            if lang == "sh":
                text = "".join(line + "\n" for line in assignments) + text
                assignments += [line for line in body.splitlines() if re.match(r"^(IFS=|[A-Z_]+=)", line)]
            for placeholder, value in fills.items():
                text = text.replace(placeholder, value)
            for name, port in documented.items():
                text = text.replace(f"127.0.0.1:{port}", f"127.0.0.1:{ports[name]}")
                text = text.replace(f"-p {port}", f"-p {ports[name]}")
            left = re.findall(r"<[a-z][^<>\n]*>", text)
            if left:
                sys.exit(f"example {index} ({lang}) has placeholders this test cannot fill: {left}")
            command = ["bash", "-euo", "pipefail", "-c", text] if lang == "sh" else [python, "-c", text]
            done = subprocess.run(command, capture_output=True, text=True, timeout=120)
            shown = body.strip().splitlines()[0]
            if done.returncode != 0 or not done.stdout.strip():
                sys.exit(
                    f"example {index} ({lang}: {shown}) failed with {done.returncode}:\n"
                    f"{done.stdout}\n{done.stderr}"
                )
            for expected in re.findall(r"#\s*(REFUSED|SERVFAIL|Commissioning)\b", body):
                if expected not in done.stdout:
                    sys.exit(f"example {index} ({lang}: {shown}) does not show {expected}:\n{done.stdout}")
            print(f"docs/serve.md example {index} ({lang}: {shown}): ok")
    finally:
        serve.terminate()
        serve.wait(timeout=30)


if __name__ == "__main__":
    main()
