//! The manifests in `deploy/webapp-operator/`: RBAC grants exactly the API
//! calls the operator makes, the Deployment's flags exist and agree with
//! its ports, probes, lease and routes namespace, and the sample WebApp is
//! valid.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use clap::Parser;
use ctrlkit_example_webapp::controller::{Cli, NAME};
use ctrlkit_example_webapp::resource::{WebApp, crd};
use ctrlkit_example_webapp::routes::{DEFAULT_NAME, RoutesRef};
use ctrlkit_testcluster::crd::CustomResourceDefinition;
use serde::Deserialize;
use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every YAML document in `file`.
fn documents(file: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(file).unwrap();
    serde_yaml::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).unwrap_or_else(|e| panic!("{}: {e}", file.display())))
        .filter(|v| !v.is_null())
        .collect()
}

fn manifests() -> Vec<Value> {
    let dir = repo().join("deploy/webapp-operator");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files.iter().flat_map(|f| documents(f)).collect()
}

fn one<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    let found: Vec<_> = docs.iter().filter(|d| d["kind"] == kind).collect();
    assert_eq!(found.len(), 1, "expected exactly one {kind}");
    found[0]
}

fn str_at<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no string at {pointer} in {value}"))
}

type Grant = (String, String, String, String);

/// (apiGroup, resource, resourceName or "*", verb) for every permission.
fn grants(role: &Value) -> BTreeSet<Grant> {
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| a.iter().map(|s| s.as_str().unwrap().to_string()).collect())
            .unwrap_or_default()
    };
    let mut out = BTreeSet::new();
    for rule in role["rules"].as_array().unwrap() {
        let names = match strings(&rule["resourceNames"]) {
            n if n.is_empty() => vec!["*".to_string()],
            n => n,
        };
        for group in strings(&rule["apiGroups"]) {
            for resource in strings(&rule["resources"]) {
                for name in &names {
                    for verb in strings(&rule["verbs"]) {
                        assert_ne!(verb, "*", "wildcard verbs are not least privilege");
                        out.insert((group.clone(), resource.clone(), name.clone(), verb));
                    }
                }
            }
        }
    }
    out
}

fn table(rows: &[(&str, &str, &str, &[&str])]) -> BTreeSet<Grant> {
    rows.iter()
        .flat_map(|(g, r, n, verbs)| {
            verbs
                .iter()
                .map(move |v| (g.to_string(), r.to_string(), n.to_string(), v.to_string()))
        })
        .collect()
}

const GROUP: &str = "example.ctrlkit.dev";

/// What the operator calls, and where in the code.
fn needed() -> BTreeSet<Grant> {
    table(&[
        // The WebApp informer; api.rs: add_finalizer/remove_finalizer (JSON patch).
        (GROUP, "webapps", "*", &["list", "watch", "patch"]),
        // api.rs: patch_status (merge patch of the status subresource).
        (GROUP, "webapps/status", "*", &["patch"]),
        // blockOwnerDeletion on the children's controller references.
        (GROUP, "webapps/finalizers", "*", &["update"]),
        // Informers of the children and the routes ConfigMap; KubeChildControl
        // create and patch; api.rs: set_route (patch, create) and remove_route (patch).
        ("", "configmaps", "*", &["list", "watch", "create", "patch"]),
        ("", "services", "*", &["list", "watch", "create", "patch"]),
        (
            "apps",
            "deployments",
            "*",
            &["list", "watch", "create", "patch"],
        ),
        // KubeChildControl's events (ctrlkit-events): core/v1, created then
        // patched to bump their count.
        ("", "events", "*", &["create", "patch"]),
        // api.rs: kube-runtime's Recorder, events.k8s.io/v1, created then patched.
        ("events.k8s.io", "events", "*", &["create", "patch"]),
    ])
}

fn source(file: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(file)).unwrap()
}

#[test]
fn the_code_makes_only_the_calls_the_cluster_role_grants() {
    // The table above is written from the code; these keep the code to it.
    let api = source("api.rs");
    assert!(api.contains(".patch_status("));
    for verb in ["replace", "replace_status", ".delete(", ".get(", ".list("] {
        assert!(
            !api.contains(verb),
            "api.rs calls {verb}: update the RBAC and this test"
        );
    }
    let reconcile = source("reconcile.rs");
    assert!(reconcile.contains(".create(") && reconcile.contains(".patch("));
    assert!(
        !reconcile.contains(".delete("),
        "children are deleted by the garbage collector"
    );
}

#[test]
fn rbac_grants_exactly_what_the_operator_uses() {
    let docs = manifests();
    let namespace = str_at(
        one(
            &documents(&repo().join("deploy/namespace.yaml")),
            "Namespace",
        ),
        "/metadata/name",
    )
    .to_string();
    let account = one(&docs, "ServiceAccount");
    assert_eq!(str_at(account, "/metadata/name"), NAME);
    assert_eq!(str_at(account, "/metadata/namespace"), namespace);

    let cluster_role = one(&docs, "ClusterRole");
    assert_eq!(grants(cluster_role), needed());
    let role = one(&docs, "Role");
    assert_eq!(str_at(role, "/metadata/namespace"), namespace);
    assert_eq!(
        grants(role),
        table(&[
            ("coordination.k8s.io", "leases", "*", &["create"]),
            ("coordination.k8s.io", "leases", NAME, &["get", "patch"]),
        ])
    );
    for (binding_kind, role_doc) in [("ClusterRoleBinding", cluster_role), ("RoleBinding", role)] {
        let binding = one(&docs, binding_kind);
        assert_eq!(
            str_at(binding, "/roleRef/name"),
            str_at(role_doc, "/metadata/name")
        );
        assert_eq!(
            str_at(binding, "/roleRef/kind"),
            role_doc["kind"].as_str().unwrap()
        );
        assert_eq!(str_at(binding, "/subjects/0/kind"), "ServiceAccount");
        assert_eq!(str_at(binding, "/subjects/0/name"), NAME);
        assert_eq!(str_at(binding, "/subjects/0/namespace"), namespace);
    }
}

#[test]
fn the_deployment_runs_the_binary_with_flags_it_has() {
    let docs = manifests();
    let namespace = "ctrlkit-system";
    let deployment = one(&docs, "Deployment");
    assert_eq!(str_at(deployment, "/metadata/namespace"), namespace);
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(str_at(pod, "/serviceAccountName"), NAME);
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    let container = &pod["containers"][0];
    assert!(str_at(container, "/command/0").ends_with("/webapp-operator"));
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);

    // Every flag is in --help.
    let help = Command::new(env!("CARGO_BIN_EXE_webapp-operator"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(help.status.success());
    let help = String::from_utf8(help.stdout).unwrap();
    let args: Vec<String> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().replace("$(POD_NAMESPACE)", namespace))
        .collect();
    for arg in &args {
        let flag = arg.split('=').next().unwrap();
        assert!(
            help.contains(&format!("{flag} ")) || help.contains(&format!("{flag}\n")),
            "{flag} is not in --help"
        );
    }

    // And they mean what the manifests assume.
    let env_ns = container["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "POD_NAMESPACE")
        .unwrap();
    assert_eq!(
        str_at(env_ns, "/valueFrom/fieldRef/fieldPath"),
        "metadata.namespace"
    );
    let cli = Cli::try_parse_from(std::iter::once(NAME.to_string()).chain(args)).unwrap();
    assert_eq!(cli.routes.namespace, namespace);
    let config = cli.manager.config(NAME);
    let election = config.leader_election.clone().expect("leader election on");
    assert_eq!(election.lease_namespace, namespace);
    assert_eq!(election.lease_name, NAME, "the Role names this lease");
    assert!(
        config.shutdown_grace_period.as_secs()
            < pod["terminationGracePeriodSeconds"].as_u64().unwrap()
    );
    let port = |name: &str| {
        container["ports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .and_then(|p| p["containerPort"].as_u64())
            .unwrap()
    };
    let (metrics, health) = (config.metrics_addr.unwrap(), config.health_addr.unwrap());
    assert!(metrics.ip().is_unspecified() && health.ip().is_unspecified());
    assert_eq!(u64::from(metrics.port()), port("metrics"));
    assert_eq!(u64::from(health.port()), port("health"));
    assert_eq!(str_at(container, "/livenessProbe/httpGet/path"), "/healthz");
    assert_eq!(str_at(container, "/readinessProbe/httpGet/path"), "/readyz");
    assert_eq!(
        deployment["spec"]["template"]["metadata"]["annotations"]["prometheus.io/port"],
        metrics.port().to_string()
    );
}

#[test]
fn the_sample_webapp_is_valid() {
    let docs = manifests();
    let mut sample = one(&docs, "WebApp").clone();
    let crd = CustomResourceDefinition::from_value(&serde_json::to_value(crd()).unwrap()).unwrap();
    crd.version("v1")
        .unwrap()
        .schema
        .admit(&mut sample)
        .unwrap();
    let app: WebApp = serde_json::from_value(sample).unwrap();
    ctrlkit_example_webapp::validate::validate(&app).unwrap();
}

#[test]
fn routes_namespace_defaults_to_default_and_refuses_empty() {
    let cli = Cli::try_parse_from([NAME]).unwrap();
    assert_eq!(cli.routes, RoutesRef::new("default", DEFAULT_NAME));
    let cli = Cli::try_parse_from([NAME, "--routes-namespace", "ops"]).unwrap();
    assert_eq!(
        (cli.routes.namespace.as_str(), cli.routes.name.as_str()),
        ("ops", DEFAULT_NAME)
    );
    let err = Cli::try_parse_from([NAME, "--routes-namespace", ""]).unwrap_err();
    assert!(err.to_string().contains("must not be empty"), "{err}");
}
