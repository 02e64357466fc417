//! The deployment files, checked by the tools that will read them:
//!
//! - deploy/alerts.yml with `promtool check rules` and its unit tests (`promtool test rules
//!   deploy/alerts.test.yml`), deploy/prometheus.yml with `promtool check config`; every alert has
//!   a severity, a runbook section in docs/OPERATIONS.md and unit tests that see it fire and stay
//!   silent;
//! - the Grafana provisioning and the compose file against each other (mounts, data source,
//!   scrape targets, instance ids, the receiver's token), `docker-compose config`, and the demo
//!   producer's input through `toolcalls ingest`;
//! - deploy/kubernetes and deploy/kubernetes/receiver against the Kubernetes schema (PyPI's
//!   kubernetes-validate, strict), the PodMonitors against prometheus-operator's (npm's
//!   @kubernetes-models/prometheus-operator, which kubernetes-validate does not know), and the
//!   manifests against each other and the binary (the ConfigMap's TOML is read by `toolcalls
//!   run` and `toolcalls receive`).
//!
//! scripts/install-test-deps.sh installs every tool; a test whose tool is missing says
//! `skipped: …` and passes. Whether every expression returns data from a real run is
//! tests/processor/dashboard.rs.

#[path = "support/scratch.rs"]
mod scratch;

use scratch::Scratch;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `name` on PATH.
fn on_path(name: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(name).is_file()))
}

/// The virtualenv scripts/install-test-deps.sh keeps under .tools/.
fn venv_bin(name: &str) -> Option<PathBuf> {
    let p = root().join(".tools/venv/bin").join(name);
    p.is_file().then_some(p)
}

fn run(cmd: &mut Command) -> Output {
    cmd.current_dir(root())
        .output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"))
}

fn show(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The YAML documents of `path` as JSON values, read by PyYAML in the test virtualenv (the
/// workspace has no YAML crate); None when the virtualenv is missing.
fn yaml(path: &str) -> Option<Vec<Value>> {
    let python = venv_bin("python")?;
    let out = run(Command::new(python)
        .arg("-c")
        .arg(
            "import json, sys, yaml\n\
         docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d is not None]\n\
         json.dump(docs, sys.stdout)",
        )
        .arg(root().join(path)));
    assert!(out.status.success(), "reading {path}: {}", show(&out));
    Some(serde_json::from_slice(&out.stdout).expect("PyYAML's JSON"))
}

/// Like [`yaml`], for a file of one document.
fn yaml_one(path: &str) -> Option<Value> {
    let mut docs = yaml(path)?;
    assert_eq!(docs.len(), 1, "{path} holds one document");
    docs.pop()
}

const NO_VENV: &str =
    "skipped: .tools/venv (PyYAML) is not installed; scripts/install-test-deps.sh installs it";

#[test]
fn alert_rules_pass_promtool_check_and_their_unit_tests() {
    if !on_path("promtool") {
        println!("skipped: promtool not installed (scripts/install-test-deps.sh installs Debian's prometheus, which ships it)");
        return;
    }
    for args in [
        &["check", "rules", "deploy/alerts.yml"][..],
        &["test", "rules", "deploy/alerts.test.yml"],
        &["check", "config", "deploy/prometheus.yml"],
    ] {
        let out = run(Command::new("promtool").args(args));
        assert!(
            out.status.success(),
            "promtool {}: {}",
            args.join(" "),
            show(&out)
        );
    }
}

/// The GitHub anchor of a Markdown heading.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

#[test]
fn every_alert_has_a_severity_a_runbook_and_unit_tests_firing_and_silent() {
    let (Some(rules), Some(tests)) = (
        yaml_one("deploy/alerts.yml"),
        yaml_one("deploy/alerts.test.yml"),
    ) else {
        println!("{NO_VENV}");
        return;
    };
    let ops = std::fs::read_to_string(root().join("docs/OPERATIONS.md")).unwrap();
    let anchors: BTreeSet<String> = ops
        .lines()
        .filter_map(|l| l.strip_prefix('#'))
        .map(|l| anchor(l.trim_start_matches('#')))
        .collect();
    // alertname → (a test expects it silent, a test expects it firing)
    let mut tested: BTreeMap<String, (bool, bool)> = BTreeMap::new();
    for t in tests["tests"].as_array().expect("tests") {
        for case in t["alert_rule_test"].as_array().into_iter().flatten() {
            let name = case["alertname"].as_str().expect("alertname").to_owned();
            let fires = case["exp_alerts"].as_array().is_some_and(|a| !a.is_empty());
            let e = tested.entry(name).or_default();
            if fires {
                e.1 = true;
            } else {
                e.0 = true;
            }
        }
    }
    let mut names = Vec::new();
    for group in rules["groups"].as_array().expect("groups") {
        for rule in group["rules"].as_array().expect("rules") {
            let Some(name) = rule["alert"].as_str() else {
                continue;
            };
            names.push(name.to_owned());
            let severity = rule["labels"]["severity"].as_str().unwrap_or_default();
            assert!(
                ["critical", "warning"].contains(&severity),
                "{name}: severity `{severity}` is neither critical nor warning"
            );
            assert!(
                rule["annotations"]["summary"].is_string(),
                "{name}: no summary"
            );
            let runbook = rule["annotations"]["runbook_url"]
                .as_str()
                .unwrap_or_default();
            let want = format!("docs/OPERATIONS.md#{}", name.to_lowercase());
            assert_eq!(runbook, want, "{name}: runbook_url");
            assert!(
                anchors.contains(&name.to_lowercase()),
                "{name}: docs/OPERATIONS.md has no section `{name}` for its runbook"
            );
            assert_eq!(
                tested.get(name),
                Some(&(true, true)),
                "{name}: deploy/alerts.test.yml must see it silent and firing"
            );
        }
    }
    assert!(names.len() >= 10, "{} alerts", names.len());
    let unknown: Vec<&String> = tested.keys().filter(|n| !names.contains(n)).collect();
    assert!(
        unknown.is_empty(),
        "tests of alerts that do not exist: {unknown:?}"
    );
}

/// The `(x, y, w, h)` of every panel of the dashboard.
fn grid(panel: &Value) -> (i64, i64, i64, i64) {
    let g = &panel["gridPos"];
    let n = |k: &str| {
        g[k].as_i64()
            .unwrap_or_else(|| panic!("gridPos.{k} of {panel}"))
    };
    (n("x"), n("y"), n("w"), n("h"))
}

#[test]
fn the_dashboard_is_well_formed_and_uses_the_provisioned_data_source() {
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("deploy/grafana/dashboards/toolcalls.json")).unwrap(),
    )
    .expect("the dashboard is JSON");
    assert_eq!(dashboard["uid"], "toolcalls");
    let vars = dashboard["templating"]["list"]
        .as_array()
        .expect("variables");
    assert!(
        vars.iter().any(|v| v["name"] == "datasource"
            && v["type"] == "datasource"
            && v["query"] == "prometheus"),
        "a data source variable of type prometheus"
    );
    let panels = dashboard["panels"].as_array().expect("panels");
    let mut ids = BTreeSet::new();
    let mut cells = BTreeSet::new();
    let mut titles = BTreeSet::new();
    for p in panels {
        assert!(
            ids.insert(p["id"].as_i64().expect("id")),
            "panel ids repeat"
        );
        let (x, y, w, h) = grid(p);
        assert!(
            x >= 0 && w > 0 && x + w <= 24 && h > 0,
            "{}: outside the grid",
            p["title"]
        );
        for cx in x..x + w {
            for cy in y..y + h {
                assert!(
                    cells.insert((cx, cy)),
                    "{} overlaps another panel",
                    p["title"]
                );
            }
        }
        if p["type"] == "row" {
            continue;
        }
        titles.insert(p["title"].as_str().expect("title").to_owned());
        assert_eq!(p["datasource"]["uid"], "${datasource}", "{}", p["title"]);
        let targets = p["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{}: no query", p["title"]);
        for t in targets {
            assert_eq!(t["datasource"]["uid"], "${datasource}", "{}", p["title"]);
            let expr = t["expr"].as_str().expect("expr");
            let processors =
                expr.contains(r#"job="toolcalls""#) && expr.contains(r#"instance=~"$instance""#);
            let followers = expr.contains(r#"job="toolcalls-producer""#)
                && expr.contains(r#"instance=~"$follower""#);
            let receivers = expr.contains(r#"job="toolcalls-receiver""#)
                && expr.contains(r#"instance=~"$receiver""#);
            assert!(
                processors || followers || receivers,
                "{}: `{expr}` selects no job with its variable (the processors' and the instance, the followers' and the follower, the receivers' and the receiver)",
                p["title"]
            );
        }
    }
    // What the dashboard must show (docs/OPERATIONS.md, "Dashboard").
    let text = serde_json::to_string(&dashboard).unwrap();
    for metric in [
        "toolcalls_input_events_total",
        "toolcalls_output_records_total",
        "toolcalls_correlation_matches_total",
        "toolcalls_state_pending_calls",
        "toolcalls_state_pending_bytes",
        "toolcalls_state_oldest_pending_age_seconds",
        "toolcalls_state_held_events",
        "toolcalls_state_forgotten_sessions",
        "toolcalls_input_out_of_order_total",
        "toolcalls_consumer_lag_records",
        "toolcalls_consumer_lag_seconds",
        "toolcalls_dlq_messages_total",
        "toolcalls_output_transactions_total",
        "toolcalls_restore_duration_seconds",
        "toolcalls_restore_records_total",
        "toolcalls_output_end_to_end_latency_seconds",
        "toolcalls_producer_events_sent_total",
        "toolcalls_producer_events_left_out_total",
        "toolcalls_producer_file_bytes_behind",
        "toolcalls_producer_unreadable_paths",
        "toolcalls_receive_requests_total",
        "toolcalls_receive_events_total",
    ] {
        assert!(
            text.contains(metric),
            "the dashboard does not show {metric}"
        );
    }
}

/// `docker-compose config` reads the compose file as Docker Compose will (interpolation, the
/// schema of every service): no Docker engine needed.
#[test]
fn the_compose_file_passes_docker_compose_config() {
    if !on_path("docker-compose") {
        println!("skipped: docker-compose not installed (scripts/install-test-deps.sh installs Debian's)");
        return;
    }
    let out = run(Command::new("docker-compose").current_dir(root()).args([
        "-f",
        "docker-compose.yml",
        "config",
        "-q",
    ]));
    assert!(
        out.status.success(),
        "docker-compose config: {}",
        show(&out)
    );
    // The receiver's script keeps its command substitution for the container's shell (Compose
    // shows a literal `$` as `$$`, as it must be written).
    let config = run(Command::new("docker-compose").current_dir(root()).args([
        "-f",
        "docker-compose.yml",
        "config",
    ]));
    let text = String::from_utf8_lossy(&config.stdout);
    assert!(
        text.contains(r#"TOOLCALLS_RECEIVE_TOKEN="$$(cat /token/receive)""#),
        "{text}"
    );
}

#[test]
fn compose_prometheus_and_grafana_fit_together() {
    let (Some(compose), Some(prom), Some(datasources), Some(providers)) = (
        yaml_one("docker-compose.yml"),
        yaml_one("deploy/prometheus.yml"),
        yaml_one("deploy/grafana/provisioning/datasources/prometheus.yml"),
        yaml_one("deploy/grafana/provisioning/dashboards/toolcalls.yml"),
    ) else {
        println!("{NO_VENV}");
        return;
    };
    let services = compose["services"].as_object().expect("services");
    // Nothing is published beyond the host: Kafka here has no authentication, and Phoenix, Grafana
    // and the processors show tool arguments and results.
    for (name, service) in services {
        for port in service["ports"].as_array().into_iter().flatten() {
            let port = port.as_str().unwrap_or_default();
            assert!(
                port.starts_with("127.0.0.1:"),
                "{name} publishes {port} beyond loopback"
            );
        }
    }
    // Grafana lets anyone on the host look, and nobody log in with its default admin / admin:
    // no admin user is created.
    let grafana = &services["grafana"]["environment"];
    assert_eq!(grafana["GF_AUTH_ANONYMOUS_ORG_ROLE"], "Viewer");
    assert_eq!(
        grafana["GF_SECURITY_DISABLE_INITIAL_ADMIN_CREATION"], "true",
        "Grafana would create its admin with the well-known password admin"
    );
    // Two processors of one group, with distinct instance ids, each scraped by Prometheus.
    let processors: Vec<(&String, &Value)> = services
        .iter()
        .filter(|(_, s)| s["command"] == serde_json::json!(["toolcalls", "run"]))
        .collect();
    assert_eq!(processors.len(), 2, "two processor instances");
    let ids: BTreeSet<&str> = processors
        .iter()
        .map(|(_, s)| {
            s["environment"]["TOOLCALLS_INSTANCE_ID"]
                .as_str()
                .expect("instance id")
        })
        .collect();
    assert_eq!(ids.len(), 2, "distinct instance ids: {ids:?}");
    let targets: BTreeSet<String> = prom["scrape_configs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["job_name"] == "toolcalls")
        .flat_map(|c| c["static_configs"].as_array().unwrap())
        .flat_map(|c| c["targets"].as_array().unwrap())
        .map(|t| t.as_str().unwrap().to_owned())
        .collect();
    let expected: BTreeSet<String> = processors
        .iter()
        .map(|(name, s)| {
            let port = s["environment"]["TOOLCALLS_HTTP_ADDR"]
                .as_str()
                .and_then(|a| a.rsplit_once(':'))
                .map(|(_, p)| p)
                .expect("TOOLCALLS_HTTP_ADDR");
            format!("{name}:{port}")
        })
        .collect();
    assert_eq!(
        targets, expected,
        "Prometheus scrapes exactly the processors"
    );
    // Every live follower serves its metrics, and Prometheus scrapes exactly those as the
    // followers' job (the producer alerts select it).
    let followers: Vec<(&String, &Value)> = services
        .iter()
        .filter(|(_, s)| {
            let args = s["command"].as_array().into_iter().flatten();
            let args: Vec<&str> = args.filter_map(Value::as_str).collect();
            args.starts_with(&["toolcalls", "ingest"]) && args.contains(&"--follow")
        })
        .collect();
    assert_eq!(followers.len(), 2, "two live followers");
    let follower_targets: BTreeSet<String> = prom["scrape_configs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["job_name"] == "toolcalls-producer")
        .flat_map(|c| c["static_configs"].as_array().unwrap())
        .flat_map(|c| c["targets"].as_array().unwrap())
        .map(|t| t.as_str().unwrap().to_owned())
        .collect();
    let expected: BTreeSet<String> = followers
        .iter()
        .map(|(name, s)| {
            let args: Vec<&str> = s["command"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(Value::as_str)
                .collect();
            let addr = args
                .iter()
                .position(|a| *a == "--metrics-addr")
                .and_then(|i| args.get(i + 1))
                .unwrap_or_else(|| panic!("{name} serves no metrics (--metrics-addr)"));
            format!("{name}:{}", addr.rsplit_once(':').expect("host:port").1)
        })
        .collect();
    assert_eq!(
        follower_targets, expected,
        "Prometheus scrapes exactly the followers as toolcalls-producer"
    );
    // The receiver, behind its token, serves its metrics, scraped as the receivers' job (the
    // receiver alerts select it); the demo hooks post to it with the token it made.
    let receiver = &services["receiver"];
    let script = receiver["command"][0]
        .as_str()
        .expect("the receiver's script");
    assert!(
        script.contains("TOOLCALLS_RECEIVE_TOKEN=") && script.contains(" toolcalls receive "),
        "{script}"
    );
    // Root only to make and read the token: what parses requests runs as nobody.
    assert!(
        script.contains("exec setpriv --reuid=65534 --regid=65534 --clear-groups"),
        "{script}"
    );
    let metrics_port = script
        .split_whitespace()
        .skip_while(|a| *a != "--metrics-addr")
        .nth(1)
        .and_then(|a| a.rsplit_once(':'))
        .map(|(_, port)| port)
        .expect("the receiver serves its metrics (--metrics-addr)");
    let receiver_targets: Vec<&str> = prom["scrape_configs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["job_name"] == "toolcalls-receiver")
        .flat_map(|c| c["static_configs"].as_array().unwrap())
        .flat_map(|c| c["targets"].as_array().unwrap())
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(receiver_targets, [format!("receiver:{metrics_port}")]);
    let hooks = &services["hooks"]["command"];
    assert_eq!(hooks[0], "/demo/hooks.sh");
    assert!(root().join("deploy/demo/hooks.sh").is_file());
    let token_volume = |service: &str| {
        services[service]["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .find(|v| v.ends_with(":/token") || v.ends_with(":/token:ro"))
            .map(|v| v.split(':').next().unwrap().to_owned())
    };
    assert!(
        token_volume("receiver").is_some(),
        "the receiver keeps its token"
    );
    assert_eq!(token_volume("hooks"), token_volume("receiver"));
    assert!(
        hooks[2].as_str().unwrap().starts_with("/token/")
            && script.contains(hooks[2].as_str().unwrap()),
        "the hooks read the token the receiver made: {hooks}"
    );
    assert_eq!(
        prom["rule_files"],
        serde_json::json!(["alerts.yml"]),
        "the rules beside the config"
    );

    // Each mount's source exists, and Prometheus's files are mounted where its config says.
    let mounts = |service: &str| -> BTreeMap<String, String> {
        services[service]["volumes"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|v| {
                let mut parts = v.as_str().expect("a short volume").split(':');
                let (src, dst) = (parts.next().unwrap(), parts.next().expect("a target"));
                if src.starts_with('.') || src.starts_with('/') {
                    assert!(
                        root().join(src).exists(),
                        "{service} mounts {src}, which does not exist"
                    );
                } else {
                    assert!(
                        compose["volumes"].get(src).is_some(),
                        "{service} mounts the volume {src}, which is not declared"
                    );
                }
                (dst.to_owned(), src.trim_start_matches("./").to_owned())
            })
            .collect()
    };
    let p = mounts("prometheus");
    assert_eq!(p["/etc/prometheus/prometheus.yml"], "deploy/prometheus.yml");
    assert_eq!(p["/etc/prometheus/alerts.yml"], "deploy/alerts.yml");
    let g = mounts("grafana");
    assert_eq!(
        g["/etc/grafana/provisioning"],
        "deploy/grafana/provisioning"
    );
    let dashboards_dir = providers["providers"][0]["options"]["path"]
        .as_str()
        .unwrap();
    assert_eq!(g[dashboards_dir], "deploy/grafana/dashboards");
    let home = services["grafana"]["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
        .as_str()
        .unwrap();
    assert_eq!(home, format!("{dashboards_dir}/toolcalls.json"));

    // The data source is the compose Prometheus, the default one (the dashboard's variable).
    let ds = &datasources["datasources"][0];
    assert_eq!(ds["type"], "prometheus");
    assert!(ds["isDefault"].as_bool().unwrap());
    let port = services["prometheus"]["ports"][0].as_str().unwrap();
    assert_eq!(
        ds["url"],
        format!("http://prometheus:{}", port.rsplit(':').next().unwrap())
    );

    // The agents run the demo script, mounted; the followers read the files they write, from
    // the same volume, each with its own checkpoints.
    let agents = mounts("agents");
    let script = services["agents"]["command"][0]
        .as_str()
        .expect("the agents' command");
    assert!(script.contains("/demo/agent.sh"), "{script}");
    assert!(root().join(&agents["/demo"]).join("agent.sh").is_file());
    let sessions = &agents["/sessions"];
    let mut checkpoints = BTreeSet::new();
    for follower in ["producer", "producer-without-ids"] {
        let argv: Vec<&str> = services[follower]["command"]
            .as_array()
            .expect("a command list")
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert_eq!(
            &argv[..3],
            ["toolcalls", "ingest", "--follow"],
            "{follower}"
        );
        let followed = argv.last().unwrap();
        assert!(
            followed.starts_with("/sessions/"),
            "{follower} follows {followed}"
        );
        assert!(script.contains(followed), "nobody writes {followed}");
        assert_eq!(&mounts(follower)["/sessions"], sessions, "{follower}");
        let at = argv
            .iter()
            .position(|a| *a == "--checkpoint-dir")
            .expect("checkpoints");
        assert!(
            checkpoints.insert(argv[at + 1]),
            "{follower} shares its checkpoints"
        );
    }
}

/// `toolcalls ARGS`, checked for success.
fn toolcalls(args: &[&str]) -> String {
    let out = run(Command::new(env!("CARGO_BIN_EXE_toolcalls")).args(args));
    assert!(out.status.success(), "toolcalls {args:?}: {}", show(&out));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn the_demo_agents_make_every_kind_of_record_through_the_follower() {
    let dir = Scratch::new("deploy");
    let sessions = dir.join("sessions");
    let agent = run(Command::new(root().join("deploy/demo/agent.sh"))
        .arg(&sessions)
        .args(["2", "0"]));
    assert!(agent.status.success(), "{}", show(&agent));
    for (drop_ids, strategy) in [(false, "call_id 10"), (true, "checksum 10")] {
        let events = dir.join(format!("events-{drop_ids}.jsonl"));
        let events = events.to_str().unwrap();
        let mut args = vec![
            "ingest",
            "--follow",
            "--once",
            "--format",
            "claude-code",
            "--strict",
            "-o",
            events,
            sessions.to_str().unwrap(),
        ];
        if drop_ids {
            args.push("--drop-ids");
        }
        toolcalls(&args);
        let summary = toolcalls(&["local", "-o", "/dev/null", events]);
        assert!(
            summary.contains("12 records")
                && summary.contains("Succeeded 8, Failed 2, Interrupted 2"),
            "{summary}"
        );
        assert!(summary.contains(strategy), "{summary}");
    }
}

/// The manifests of deploy/kubernetes that kustomization.yaml applies.
const KUSTOMIZED: [&str; 6] = [
    "serviceaccount.yaml",
    "configmap.yaml",
    "services.yaml",
    "statefulset.yaml",
    "poddisruptionbudget.yaml",
    "podmonitor.yaml",
];

/// Every manifest of deploy/kubernetes (the kustomization's and the example Secret).
fn manifests() -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir(root().join("deploy/kubernetes"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml") && n != "kustomization.yaml")
        .collect();
    files.sort();
    files
}

#[test]
fn kubernetes_manifests_validate_against_the_kubernetes_schema() {
    let Some(validate) = venv_bin("kubernetes-validate") else {
        println!("skipped: kubernetes-validate not installed (scripts/install-test-deps.sh installs it into .tools/venv)");
        return;
    };
    let files = manifests();
    // Strict: a field the schema does not know is an error, not a field the API server drops.
    let out = run(Command::new(validate)
        .args(["--strict", "-k", "1.33.0", "-k", "1.37.0"])
        .args(files.iter().map(|f| format!("deploy/kubernetes/{f}"))));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", show(&out));
    // kubernetes-validate passes what it has no schema for with a warning: only the PodMonitor
    // (a prometheus-operator resource, checked by the next test) may be such.
    let mut passed = 0;
    for line in text.lines() {
        if line.starts_with("WARN") {
            assert!(line.contains("kind PodMonitor"), "{line}");
        } else {
            assert!(
                line.starts_with("INFO") && line.contains(" passed "),
                "{line}"
            );
            passed += 1;
        }
    }
    // serviceaccount, configmap, 3 services, statefulset, pdb, 2 secrets: against two versions.
    assert_eq!(passed, 9 * 2, "{text}");
}

#[test]
fn the_podmonitors_validate_against_the_prometheus_operator_schema() {
    let node_dir = root().join(".tools/node");
    let models = node_dir.join("node_modules/@kubernetes-models/prometheus-operator");
    if !on_path("node") || !models.is_dir() {
        println!("skipped: node or npm's @kubernetes-models/prometheus-operator not installed (scripts/install-test-deps.sh installs it into .tools/node)");
        return;
    }
    let (Some(podmonitor), Some(receivers)) = (
        yaml_one("deploy/kubernetes/podmonitor.yaml"),
        yaml_one("deploy/kubernetes/receiver/podmonitor.yaml"),
    ) else {
        println!("{NO_VENV}");
        return;
    };
    // The models' validators are compiled from prometheus-operator's API types (the schema of
    // its CRDs): types, patterns, enums and required fields; like the API server they let unknown
    // fields through (kubernetes_parts_refer_to_each_other checks the fields that matter).
    let validate = |doc: &Value| -> Output {
        let mut child = Command::new("node")
            .current_dir(&node_dir)
            .args(["--input-type=module", "-e"])
            .arg(
                r#"import { PodMonitor } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PodMonitor";
import { readFileSync } from "node:fs";
const doc = JSON.parse(readFileSync(0, "utf8"));
if (doc.apiVersion !== PodMonitor.apiVersion || doc.kind !== PodMonitor.kind) throw new Error(`not a PodMonitor: ${doc.apiVersion} ${doc.kind}`);
new PodMonitor(doc).validate();
console.log("valid");"#,
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("running node");
        use std::io::Write as _;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(doc.to_string().as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    };
    for doc in [&podmonitor, &receivers] {
        let out = validate(doc);
        assert!(out.status.success(), "{}", show(&out));
    }
    // The validator does reject what the schema forbids.
    let mut broken = podmonitor.clone();
    broken["spec"]["podMetricsEndpoints"][0]["interval"] = "15 seconds".into();
    let out = validate(&broken);
    assert!(!out.status.success(), "a malformed interval was accepted");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("interval"),
        "{}",
        show(&out)
    );
}

/// The `key` of a `matchLabels`-like map, as a set of pairs.
fn labels(v: &Value) -> BTreeSet<(String, String)> {
    v.as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
        .collect()
}

/// A container's ports, by name.
fn container_ports(container: &Value) -> BTreeMap<&str, i64> {
    container["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap(),
                p["containerPort"].as_i64().unwrap(),
            )
        })
        .collect()
}

/// A container's environment variables, by name.
fn container_env(container: &Value) -> BTreeMap<&str, &Value> {
    container["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["name"].as_str().unwrap(), e))
        .collect()
}

/// The volume of `pod` mounted in `container` at `dir`.
fn mounted_volume<'a>(pod: &'a Value, container: &Value, dir: &str) -> &'a Value {
    let mount = container["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["mountPath"] == dir)
        .unwrap_or_else(|| panic!("{dir} is mounted"));
    pod["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == mount["name"])
        .expect("the mounted volume")
}

#[test]
fn kubernetes_parts_refer_to_each_other() {
    let Some(kustomization) = yaml_one("deploy/kubernetes/kustomization.yaml") else {
        println!("{NO_VENV}");
        return;
    };
    let listed: Vec<&str> = kustomization["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    assert_eq!(listed, KUSTOMIZED, "kustomization.yaml resources");
    let files = manifests();
    assert_eq!(
        files
            .iter()
            .filter(|f| !KUSTOMIZED.contains(&f.as_str()))
            .collect::<Vec<_>>(),
        ["secret.example.yaml"],
        "every manifest but the example Secret is applied"
    );
    let mut by_kind: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for f in &files {
        for doc in yaml(&format!("deploy/kubernetes/{f}")).unwrap() {
            by_kind
                .entry(doc["kind"].as_str().unwrap().to_owned())
                .or_default()
                .push(doc);
        }
    }
    let one = |kind: &str| -> &Value {
        let docs = &by_kind[kind];
        assert_eq!(docs.len(), 1, "one {kind}");
        &docs[0]
    };
    let sts = one("StatefulSet");
    let pod = &sts["spec"]["template"];
    let pod_labels = labels(&pod["metadata"]["labels"]);
    let selects_pods = |selector: &Value, what: &str| {
        let s = labels(selector);
        assert!(
            !s.is_empty() && s.is_subset(&pod_labels),
            "{what} does not select the pods"
        );
    };
    selects_pods(
        &sts["spec"]["selector"]["matchLabels"],
        "the StatefulSet's selector",
    );
    let container = &pod["spec"]["containers"][0];
    let ports = container_ports(container);
    let env = container_env(container);

    // The instance id is the pod's name: stable per ordinal, so the transactional id survives a
    // restart.
    assert_eq!(
        env["TOOLCALLS_INSTANCE_ID"]["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.name"
    );

    // Probes on the processor's HTTP port.
    for (probe, path) in [
        ("readinessProbe", "/readyz"),
        ("livenessProbe", "/healthz"),
        ("startupProbe", "/healthz"),
    ] {
        let get = &container[probe]["httpGet"];
        assert_eq!(get["path"], path, "{probe}");
        assert!(
            ports.contains_key(get["port"].as_str().unwrap()),
            "{probe}: port"
        );
    }
    for r in ["requests", "limits"] {
        assert!(
            container["resources"][r]["memory"].is_string(),
            "resources.{r}.memory"
        );
    }
    assert!(container["resources"]["requests"]["cpu"].is_string());

    // The config file: the ConfigMap, mounted where TOOLCALLS_CONFIG points.
    let cm = one("ConfigMap");
    let config_path = env["TOOLCALLS_CONFIG"]["value"].as_str().unwrap();
    let (dir, file) = config_path.rsplit_once('/').unwrap();
    let volume = mounted_volume(pod, container, dir);
    assert_eq!(volume["configMap"]["name"], cm["metadata"]["name"]);
    let toml = cm["data"][file]
        .as_str()
        .expect("the config file in the ConfigMap");

    // The binary reads it. `toolcalls run` checks the file (every key, every value), then the
    // settings in order, the `--kafka` properties it manages last: refused for that property, the
    // file passed everything before it.
    let dir = Scratch::new("k8s");
    let path = dir.join(file);
    std::fs::write(&path, toml).unwrap();
    let out = run(Command::new(env!("CARGO_BIN_EXE_toolcalls"))
        .arg("run")
        .arg("-c")
        .arg(&path)
        .args(["--kafka", "isolation.level=read_committed"]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.code() == Some(2)
            && stderr.contains("isolation.level=… is managed by the processor"),
        "the ConfigMap's config.toml was not accepted: {}",
        show(&out)
    );
    let http_port = toml
        .lines()
        .find_map(|l| l.strip_prefix("http_addr = "))
        .and_then(|v| v.trim_matches('"').rsplit_once(':'))
        .map(|(_, p)| p.parse::<i64>().unwrap())
        .expect("http_addr in config.toml");
    assert!(
        ports.values().any(|p| *p == http_port),
        "http_addr's port {http_port} is not a container port"
    );

    // Secrets: the broker credentials, passed on as TOOLCALLS_KAFKA, and the query API's token,
    // each a key of a Secret of the example.
    let from_secret = |var: &str| {
        let r = &env[var]["valueFrom"]["secretKeyRef"];
        let secret = by_kind["Secret"]
            .iter()
            .find(|s| s["metadata"]["name"] == r["name"])
            .unwrap_or_else(|| panic!("{var}: no Secret {}", r["name"]));
        let key = r["key"].as_str().unwrap();
        assert!(secret["stringData"][key].is_string(), "{var}: key {key}");
    };
    for var in ["KAFKA_SASL_USERNAME", "KAFKA_SASL_PASSWORD"] {
        from_secret(var);
        assert!(
            env["TOOLCALLS_KAFKA"]["value"]
                .as_str()
                .unwrap()
                .contains(&format!("$({var})")),
            "TOOLCALLS_KAFKA uses {var}"
        );
    }
    from_secret("TOOLCALLS_API_TOKEN");
    let api_port = env["TOOLCALLS_API_ADDR"]["value"]
        .as_str()
        .and_then(|a| a.rsplit_once(':'))
        .map(|(_, p)| p.parse::<i64>().unwrap())
        .expect("TOOLCALLS_API_ADDR");
    assert_eq!(ports.get("api"), Some(&api_port), "the api container port");
    assert_ne!(
        api_port, http_port,
        "the query API has a listener of its own"
    );
    assert!(
        !toml
            .lines()
            .any(|l| !l.trim_start().starts_with('#') && l.contains("sasl.password")),
        "no password in the ConfigMap"
    );

    // The governing Service exists and is headless; every Service, the PDB and the PodMonitor
    // select the pods, on a port the container has.
    let services = &by_kind["Service"];
    let headless = services
        .iter()
        .find(|s| s["metadata"]["name"] == sts["spec"]["serviceName"])
        .expect("the StatefulSet's serviceName is a Service");
    assert_eq!(headless["spec"]["clusterIP"], "None");
    for s in services {
        let name = s["metadata"]["name"].as_str().unwrap();
        selects_pods(&s["spec"]["selector"], name);
        for p in s["spec"]["ports"].as_array().unwrap() {
            assert!(
                ports.contains_key(p["targetPort"].as_str().unwrap()),
                "{name}: targetPort"
            );
        }
    }
    let target_ports = |name: &str| -> Vec<String> {
        let s = services
            .iter()
            .find(|s| s["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("Service {name}"));
        s["spec"]["ports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["targetPort"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(target_ports("toolcalls-metrics"), ["http"]);
    assert_eq!(target_ports("toolcalls-api"), ["api"]);
    selects_pods(
        &one("PodDisruptionBudget")["spec"]["selector"]["matchLabels"],
        "the PodDisruptionBudget",
    );
    let pm = one("PodMonitor");
    selects_pods(&pm["spec"]["selector"]["matchLabels"], "the PodMonitor");
    let endpoint = &pm["spec"]["podMetricsEndpoints"][0];
    assert!(ports.contains_key(endpoint["port"].as_str().unwrap()));
    assert_eq!(endpoint["path"], "/metrics");
    // The job label the alerts select: the value of the pod label named by jobLabel.
    let job_label = pm["spec"]["jobLabel"].as_str().unwrap();
    assert_eq!(pod["metadata"]["labels"][job_label], "toolcalls");
    assert_eq!(
        pod["spec"]["serviceAccountName"],
        one("ServiceAccount")["metadata"]["name"]
    );
}

/// The format of a transcript: as detected, else the one that reads it without a bad line.
fn format_of(path: &std::path::Path) -> Option<&'static str> {
    use toolcalls_adapters::Format;
    let bytes = std::fs::read(path).ok()?;
    let name = path.to_string_lossy();
    Format::detect(&name, &bytes[..bytes.len().min(64 * 1024)])
        .or_else(|| {
            Format::ALL.iter().copied().find(|f| {
                let p = toolcalls_adapters::parse(*f, &name, &bytes, &Default::default());
                !p.events.is_empty() && p.errors.is_empty()
            })
        })
        .map(Format::name)
}

/// The lines of the `[redact]` table of a TOML text, without comments, blank lines and indentation.
fn redact_table(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .skip_while(|l| *l != "[redact]")
        .skip(1)
        .take_while(|l| !l.starts_with('['))
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect()
}

/// deploy/redact.toml, the rules the compose stack and the Kubernetes config run with: each
/// pattern and pointer redacts a sample of its credential format, the Kubernetes config holds the
/// same rules, every toolcalls service of the compose stack reads them, and they change nothing
/// in real tool traffic (the shared transcripts, the adapters' samples).
#[test]
fn the_default_redaction_rules_catch_credentials_and_leave_real_traffic_alone() {
    let rules = std::fs::read_to_string(root().join("deploy/redact.toml")).unwrap();
    let configmap =
        std::fs::read_to_string(root().join("deploy/kubernetes/configmap.yaml")).unwrap();
    assert!(redact_table(&rules).len() > 10, "{rules}");
    assert_eq!(
        redact_table(&configmap),
        redact_table(&rules),
        "the ConfigMap's [redact] table is deploy/redact.toml's"
    );
    let compose = std::fs::read_to_string(root().join("docker-compose.yml")).unwrap();
    let services = compose
        .matches("./deploy/redact.toml:/etc/toolcalls/redact.toml:ro")
        .count();
    let commands = compose.matches("[\"toolcalls\", ").count()
        + compose.matches("exec toolcalls ").count()
        + compose
            .matches("--no-new-privs\n        toolcalls ")
            .count();
    assert_eq!(
        services, commands,
        "every toolcalls service of the compose stack mounts the rules"
    );
    assert_eq!(
        compose
            .matches("TOOLCALLS_CONFIG: /etc/toolcalls/redact.toml")
            .count(),
        4,
        "the shared environment, each follower's and the receiver's name the rules"
    );

    // A sample of each format, made here rather than written out whole: the repository holds no
    // string a secret scanner would take for a credential.
    let (a36, a40) = ("a".repeat(36), "Ab3".repeat(14));
    let samples = [
        format!("sk-proj-{a40}"),
        format!("sk-ant-api03-{a40}"),
        format!("AKIA{}", "IOSFODNN7EXAMPLE"),
        format!("ghp_{a36}"),
        format!("github_pat_{a40}"),
        format!("glpat-{a40}"),
        format!("xoxb-{}-{a36}", "1".repeat(12)),
        format!("AIza{}", "B".repeat(35)),
        format!("sk_live_{a36}"),
        format!("eyJ{a40}.eyJ{a40}.{a40}"),
        format!("Bearer {a40}"),
        "postgres://app:hunter2pw@db:5432/orders".to_owned(),
        format!("-----BEGIN RSA PRIVATE KEY-----\n{a40}\n-----END RSA PRIVATE KEY-----"),
    ];
    let secrets_in = |s: &str| -> Vec<String> {
        samples
            .iter()
            .map(|x| x.replace("Bearer ", "").replace("postgres://", ""))
            .chain(["hunter2pw".to_owned(), "by-name-only".to_owned()])
            .filter(|x| s.contains(x.as_str()))
            .collect()
    };
    let dir = Scratch::new("default-redaction");
    let events: Vec<String> = samples
        .iter()
        .enumerate()
        .map(|(i, secret)| {
            let args = serde_json::json!({
                "command": format!("curl -H 'x: {secret}' https://example.com"),
                "password": "by-name-only",
                "headers": {"Authorization": "by-name-only"},
            });
            serde_json::json!({
                "v": 1, "kind": "announce", "source": "t", "session": "s",
                "callId": format!("c{i}"), "time": "2026-01-01T00:00:00Z",
                "tool": "Bash", "args": args,
            })
            .to_string()
        })
        .collect();
    let input = dir.join("events.jsonl");
    std::fs::write(&input, events.join("\n") + "\n").unwrap();
    let config = root().join("deploy/redact.toml");
    let local = |args: &[&str]| -> String {
        let out = run(Command::new(env!("CARGO_BIN_EXE_toolcalls"))
            .args(["local", "-q", "--config"])
            .arg(&config)
            .args(args));
        assert!(out.status.success(), "{}", show(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let records = local(&[input.to_str().unwrap()]);
    assert_eq!(records.lines().count(), samples.len());
    assert_eq!(secrets_in(&records), Vec::<String>::new(), "{records}");
    for record in records.lines() {
        let r: Value = serde_json::from_str(record).unwrap();
        assert_eq!(
            r["redacted"],
            serde_json::json!([
                "spec.input/password",
                "spec.input/headers/Authorization",
                "spec.input"
            ]),
            "the pointers and the pattern: {record}"
        );
    }

    // Real traffic: nothing redacted.
    let mut files = Vec::new();
    let shared = root().join("../shared/fixtures");
    if shared.is_dir() {
        for format in ["claude-code", "codex", "gemini-cli", "openai-responses"] {
            for e in std::fs::read_dir(shared.join(format))
                .into_iter()
                .flatten()
                .flatten()
            {
                files.push(e.path());
            }
        }
    } else {
        println!("the shared fixtures are missing: only the adapters' samples are checked");
    }
    for e in std::fs::read_dir(root().join("crates/adapters/tests/data")).unwrap() {
        files.push(e.unwrap().path());
    }
    let mut checked = 0;
    for file in files {
        let Some(format) = format_of(&file) else {
            panic!("{}: no format reads it", file.display());
        };
        let records = local(&["--format", format, file.to_str().unwrap()]);
        checked += records.lines().count();
        for record in records.lines() {
            assert!(
                record.contains("\"redacted\":[]") || !record.contains("\"redacted\""),
                "{}: a record of real traffic was redacted: {record}",
                file.display()
            );
        }
    }
    assert!(checked > 30, "{checked} records of real traffic");
}

/// The receiver's manifests (deploy/kubernetes/receiver): valid against the Kubernetes schema,
/// and their parts refer to each other and to the processor's ConfigMap, whose `[receive]` table
/// `toolcalls receive` accepts; scraped as the job the receiver alerts select.
#[test]
fn the_receiver_manifests_validate_and_fit_together() {
    let dir = "deploy/kubernetes/receiver";
    let mut files: Vec<String> = std::fs::read_dir(root().join(dir))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml") && n != "kustomization.yaml")
        .collect();
    files.sort();
    let Some(kustomization) = yaml_one(&format!("{dir}/kustomization.yaml")) else {
        println!("{NO_VENV}");
        return;
    };
    let listed: BTreeSet<&str> = kustomization["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    let applied: BTreeSet<&str> = files
        .iter()
        .map(String::as_str)
        .filter(|f| *f != "secret.example.yaml")
        .collect();
    assert_eq!(
        listed, applied,
        "every manifest but the example Secret is applied"
    );

    if let Some(validate) = venv_bin("kubernetes-validate") {
        let out = run(Command::new(validate)
            .args(["--strict", "-k", "1.33.0", "-k", "1.37.0"])
            .args(files.iter().map(|f| format!("{dir}/{f}"))));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{}", show(&out));
        let passed = text.lines().filter(|l| l.contains(" passed ")).count();
        for line in text.lines().filter(|l| l.starts_with("WARN")) {
            assert!(line.contains("kind PodMonitor"), "{line}");
        }
        // serviceaccount, service, deployment, pdb, secret: against two versions.
        assert_eq!(passed, 5 * 2, "{text}");
    } else {
        println!("skipped the schema: kubernetes-validate not installed (scripts/install-test-deps.sh installs it into .tools/venv)");
    }

    let doc = |file: &str| yaml_one(&format!("{dir}/{file}")).unwrap();
    let deployment = doc("deployment.yaml");
    let pod = &deployment["spec"]["template"];
    let pod_labels = labels(&pod["metadata"]["labels"]);
    let selects_pods = |selector: &Value, what: &str| {
        let s = labels(selector);
        assert!(
            !s.is_empty() && s.is_subset(&pod_labels),
            "{what} does not select the receiver's pods"
        );
    };
    selects_pods(
        &deployment["spec"]["selector"]["matchLabels"],
        "the Deployment",
    );
    selects_pods(
        &doc("poddisruptionbudget.yaml")["spec"]["selector"]["matchLabels"],
        "the PodDisruptionBudget",
    );
    let processors = yaml_one("deploy/kubernetes/podmonitor.yaml").unwrap();
    assert!(
        !labels(&processors["spec"]["selector"]["matchLabels"]).is_subset(&pod_labels),
        "the processors' PodMonitor would scrape the receivers as processors"
    );
    let container = &pod["spec"]["containers"][0];
    assert_eq!(
        container["command"],
        serde_json::json!(["toolcalls", "receive"])
    );
    let ports = container_ports(container);
    let service = doc("service.yaml");
    selects_pods(&service["spec"]["selector"], "the Service");
    for p in service["spec"]["ports"].as_array().unwrap() {
        assert!(ports.contains_key(p["targetPort"].as_str().unwrap()), "{p}");
    }
    for probe in ["startupProbe", "livenessProbe", "readinessProbe"] {
        let get = &container[probe]["httpGet"];
        assert_eq!(get["path"], "/healthz", "{probe}");
        assert_eq!(get["port"], "http", "{probe}");
    }
    let monitor = doc("podmonitor.yaml");
    selects_pods(
        &monitor["spec"]["selector"]["matchLabels"],
        "the PodMonitor",
    );
    let endpoint = &monitor["spec"]["podMetricsEndpoints"][0];
    assert!(ports.contains_key(endpoint["port"].as_str().unwrap()));
    let job = endpoint["relabelings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["targetLabel"] == "job")
        .and_then(|r| r["replacement"].as_str())
        .expect("the PodMonitor names the job");
    let alerts = std::fs::read_to_string(root().join("deploy/alerts.yml")).unwrap();
    assert!(
        alerts.contains(&format!(r#"job="{job}""#)),
        "no alert selects the job {job}"
    );

    // The token and the broker credentials, each a key of an example Secret.
    let env = container_env(container);
    let secrets: Vec<Value> = [
        format!("{dir}/secret.example.yaml"),
        "deploy/kubernetes/secret.example.yaml".to_owned(),
    ]
    .iter()
    .flat_map(|f| yaml(f).unwrap())
    .collect();
    for var in [
        "TOOLCALLS_RECEIVE_TOKEN",
        "KAFKA_SASL_USERNAME",
        "KAFKA_SASL_PASSWORD",
    ] {
        let r = &env[var]["valueFrom"]["secretKeyRef"];
        let secret = secrets
            .iter()
            .find(|s| s["metadata"]["name"] == r["name"])
            .unwrap_or_else(|| panic!("{var}: no Secret {}", r["name"]));
        assert!(
            secret["stringData"][r["key"].as_str().unwrap()].is_string(),
            "{var}"
        );
    }

    // The config file: the processor's ConfigMap, mounted where TOOLCALLS_CONFIG points, its
    // [receive] table on the container's ports, and accepted by `toolcalls receive` (it checks
    // the file and the token, then its own values: refused for the one given here).
    let cm = yaml_one("deploy/kubernetes/configmap.yaml").unwrap();
    let config_path = env["TOOLCALLS_CONFIG"]["value"].as_str().unwrap();
    let (config_dir, file) = config_path.rsplit_once('/').unwrap();
    let volume = mounted_volume(pod, container, config_dir);
    assert_eq!(volume["configMap"]["name"], cm["metadata"]["name"]);
    let toml = cm["data"][file].as_str().unwrap();
    let receive_table = toml
        .split("[receive]")
        .nth(1)
        .and_then(|t| t.split("\n[").next())
        .expect("a [receive] table");
    let port_of = |key: &str| -> i64 {
        receive_table
            .lines()
            .find_map(|l| l.trim().strip_prefix(&format!("{key} = ")))
            .and_then(|v| v.trim_matches('"').rsplit_once(':'))
            .map(|(_, p)| p.parse().unwrap())
            .unwrap_or_else(|| panic!("{key} in [receive]"))
    };
    assert_eq!(Some(&port_of("listen")), ports.get("receive"));
    assert_eq!(Some(&port_of("metrics_addr")), ports.get("http"));
    let scratch = Scratch::new("k8s-receiver");
    let path = scratch.join(file);
    std::fs::write(&path, toml).unwrap();
    let out = run(Command::new(env!("CARGO_BIN_EXE_toolcalls"))
        .env("TOOLCALLS_RECEIVE_TOKEN", "a-token-for-the-manifest-test")
        .arg("receive")
        .arg("-c")
        .arg(&path)
        .args(["--max-body-bytes", "0"]));
    assert!(
        out.status.code() == Some(2)
            && String::from_utf8_lossy(&out.stderr)
                .contains("--max-body-bytes must be greater than 0"),
        "the ConfigMap's config.toml was not accepted by receive: {}",
        show(&out)
    );
}
