//! The manifests in the repository's `deploy/` directory: every file is
//! valid YAML with Kubernetes object headers, the RBAC rules grant exactly
//! the API calls the binaries make, and the Deployments' flags, ports and
//! probes agree with the binaries.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use clap::Parser;
use ctrlkit_replicaset::cli::ControllerArgs;
use ctrlkit_runtime::manager::ManagerArgs;
use serde::Deserialize;
use serde_json::Value;

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

/// Every YAML document under `dir` (recursively), with its file name.
fn documents(dir: &Path) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            out.extend(documents(&path));
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            let text = std::fs::read_to_string(&path).unwrap();
            for doc in serde_yaml::Deserializer::from_str(&text) {
                let value = Value::deserialize(doc)
                    .unwrap_or_else(|e| panic!("{}: invalid YAML: {e}", path.display()));
                if !value.is_null() {
                    out.push((path.display().to_string(), value));
                }
            }
        }
    }
    out
}

fn find<'a>(docs: &'a [(String, Value)], kind: &str) -> Vec<&'a Value> {
    docs.iter()
        .filter(|(_, d)| d["kind"] == kind)
        .map(|(_, d)| d)
        .collect()
}

fn one<'a>(docs: &'a [(String, Value)], kind: &str) -> &'a Value {
    let found = find(docs, kind);
    assert_eq!(found.len(), 1, "expected exactly one {kind}");
    found[0]
}

fn str_at<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no string at {pointer} in {value}"))
}

/// (apiGroup, resource, resourceName or "*", verb) for every permission a
/// role grants.
fn grants(role: &Value) -> BTreeSet<(String, String, String, String)> {
    let mut out = BTreeSet::new();
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| a.iter().map(|s| s.as_str().unwrap().to_string()).collect())
            .unwrap_or_default()
    };
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

fn expected(table: &[(&str, &str, &str, &[&str])]) -> BTreeSet<(String, String, String, String)> {
    let mut out = BTreeSet::new();
    for (group, resource, name, verbs) in table {
        for verb in *verbs {
            out.insert((
                group.to_string(),
                resource.to_string(),
                name.to_string(),
                verb.to_string(),
            ));
        }
    }
    out
}

/// What each binary calls, and why (see also the comments in rbac.yaml).
fn cluster_role_for(binary: &str) -> BTreeSet<(String, String, String, String)> {
    let (group, owners) = match binary {
        "replicaset-controller" => ("apps", "replicasets"),
        _ => ("", "replicationcontrollers"),
    };
    expected(&[
        // Owner informer (list, watch) and the live read before adoption (get).
        (group, owners, "*", &["get", "list", "watch"]),
        // Status: PUT on the status subresource (checked against the source below).
        (group, &format!("{owners}/status"), "*", &["update"]),
        // blockOwnerDeletion on the pods' ownerReferences.
        (group, &format!("{owners}/finalizers"), "*", &["update"]),
        // Pod informer; KubePodControl create/delete; ref manager adoption/release patches.
        (
            "",
            "pods",
            "*",
            &["list", "watch", "create", "delete", "patch"],
        ),
        // kube-runtime's Recorder: events.k8s.io/v1, created then patched for series.
        ("events.k8s.io", "events", "*", &["create", "patch"]),
    ])
}

fn lease_role_for(binary: &str) -> BTreeSet<(String, String, String, String)> {
    // kube-lease-manager: create the Lease once, then get and patch it.
    expected(&[
        ("coordination.k8s.io", "leases", "*", &["create"]),
        ("coordination.k8s.io", "leases", binary, &["get", "patch"]),
    ])
}

/// What the binaries parse: the manager's flags and the controllers' own.
#[derive(Debug, Parser)]
struct Cli {
    #[command(flatten)]
    manager: ManagerArgs,
    #[command(flatten)]
    args: ControllerArgs,
}

#[test]
fn every_manifest_is_a_kubernetes_object() {
    let docs = documents(&deploy_dir());
    assert!(docs.len() >= 13, "found only {} documents", docs.len());
    for (file, doc) in &docs {
        for field in ["/apiVersion", "/kind", "/metadata/name"] {
            assert!(
                doc.pointer(field)
                    .and_then(Value::as_str)
                    .is_some_and(|s| !s.is_empty()),
                "{file}: missing {field}"
            );
        }
    }
}

#[test]
fn controller_code_writes_status_with_update() {
    // The ClusterRoles grant `update` on the status subresource because the
    // controller replaces status (PUT). If this changes to a patch, change
    // the RBAC too.
    let client = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("src/controller/client.rs"),
    )
    .unwrap();
    assert!(client.contains("replace_status"));
    assert!(!client.contains("patch_status"));
}

#[test]
fn rbac_and_deployments_match_the_binaries() {
    // deploy/namespace.yaml holds the only Namespace; everything lives there.
    let all = documents(&deploy_dir());
    let namespace = str_at(one(&all, "Namespace"), "/metadata/name").to_string();

    for binary in ["replicaset-controller", "replication-controller"] {
        let docs = documents(&deploy_dir().join(binary));
        let account = one(&docs, "ServiceAccount");
        let account_name = str_at(account, "/metadata/name");
        assert_eq!(account_name, binary);
        assert_eq!(str_at(account, "/metadata/namespace"), namespace);

        // RBAC: exactly what the code uses.
        let cluster_role = one(&docs, "ClusterRole");
        assert_eq!(
            grants(cluster_role),
            cluster_role_for(binary),
            "{binary} ClusterRole"
        );
        let role = one(&docs, "Role");
        assert_eq!(str_at(role, "/metadata/namespace"), namespace);
        assert_eq!(grants(role), lease_role_for(binary), "{binary} Role");
        for (binding_kind, role_doc) in
            [("ClusterRoleBinding", cluster_role), ("RoleBinding", role)]
        {
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
            assert_eq!(str_at(binding, "/subjects/0/name"), account_name);
            assert_eq!(str_at(binding, "/subjects/0/namespace"), namespace);
        }

        // Deployment.
        let deployment = one(&docs, "Deployment");
        assert_eq!(str_at(deployment, "/metadata/namespace"), namespace);
        assert_eq!(deployment["spec"]["replicas"], 1);
        let pod = &deployment["spec"]["template"]["spec"];
        assert_eq!(str_at(pod, "/serviceAccountName"), account_name);
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
        let container = &pod["containers"][0];
        let command = str_at(container, "/command/0");
        assert!(command.ends_with(&format!("/{binary}")), "{command}");
        assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
        assert_eq!(
            container["securityContext"]["allowPrivilegeEscalation"],
            false
        );
        assert!(container["resources"]["requests"]["cpu"].is_string());
        assert!(container["resources"]["requests"]["memory"].is_string());

        // The args are valid flags of the binary; $(POD_NAMESPACE) is the
        // Deployment's namespace (downward API).
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
        let args: Vec<String> = container["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().replace("$(POD_NAMESPACE)", &namespace))
            .collect();
        let cli = Cli::try_parse_from(std::iter::once(binary.to_string()).chain(args))
            .unwrap_or_else(|e| panic!("{binary}: bad args: {e}"));
        let settings = cli.manager.config(binary);
        let election = settings.leader_election.expect("leader election on");
        assert_eq!(election.lease_namespace, namespace);
        // The Role's resourceNames must name the lease the binary uses.
        assert!(
            grants(role)
                .iter()
                .any(|(_, _, name, _)| *name == election.lease_name)
        );

        // Ports and probes agree with the flags.
        let port = |name: &str| {
            container["ports"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["name"] == name)
                .and_then(|p| p["containerPort"].as_u64())
                .unwrap_or_else(|| panic!("{binary}: no port {name}"))
        };
        let metrics = settings.metrics_addr.expect("metrics enabled");
        let health = settings.health_addr.expect("health enabled");
        assert!(metrics.ip().is_unspecified() && health.ip().is_unspecified());
        assert_eq!(u64::from(metrics.port()), port("metrics"));
        assert_eq!(u64::from(health.port()), port("health"));
        assert_eq!(str_at(container, "/livenessProbe/httpGet/path"), "/healthz");
        assert_eq!(str_at(container, "/livenessProbe/httpGet/port"), "health");
        assert_eq!(str_at(container, "/readinessProbe/httpGet/path"), "/readyz");
        assert_eq!(str_at(container, "/readinessProbe/httpGet/port"), "health");
        let annotations = &deployment["spec"]["template"]["metadata"]["annotations"];
        assert_eq!(
            annotations["prometheus.io/port"],
            metrics.port().to_string()
        );
    }
}
