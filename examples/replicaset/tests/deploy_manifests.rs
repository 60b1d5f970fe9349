//! The manifests in the repository's `deploy/` directory: every file is
//! valid YAML with Kubernetes object headers; the RBAC rules grant exactly
//! the API calls the binaries make, for all namespaces (`deploy/<binary>/`)
//! and for one (`deploy/<binary>/namespaced/`), as the test cluster's RBAC
//! authorizer evaluates them; the Deployments' flags, ports and probes agree
//! with the binaries; the secure-metrics RBAC grants what the manager's
//! TokenReview/SubjectAccessReview filter needs; the image is built
//! `--locked` from digest-pinned bases.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use clap::Parser;
use ctrlkit_replicaset::cli::ControllerArgs;
use ctrlkit_runtime::manager::ManagerArgs;
use ctrlkit_testcluster::rbac::{Policy, TokenRegistry, UserInfo, resolve};
use serde::Deserialize;
use serde_json::{Value, json};

const BINARIES: [&str; 2] = ["replicaset-controller", "replication-controller"];
/// The namespace the namespaced variants watch.
const WATCHED: &str = "demo";

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

type Docs = Vec<(String, Value)>;

/// Every YAML document in the files directly in `dir`, with its file name.
fn documents(dir: &Path) -> Docs {
    let mut out = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_file() && path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
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

/// [`documents`] of `dir` and every directory below it.
fn all_documents(dir: &Path) -> Docs {
    let mut out = documents(dir);
    let mut dirs: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for sub in dirs {
        out.extend(all_documents(&sub));
    }
    out
}

fn find<'a>(docs: &'a Docs, kind: &str) -> Vec<&'a Value> {
    docs.iter()
        .filter(|(_, d)| d["kind"] == kind)
        .map(|(_, d)| d)
        .collect()
}

fn one<'a>(docs: &'a Docs, kind: &str) -> &'a Value {
    let found = find(docs, kind);
    assert_eq!(found.len(), 1, "expected exactly one {kind}");
    found[0]
}

fn named<'a>(docs: &'a Docs, kind: &str, name: &str) -> &'a Value {
    find(docs, kind)
        .into_iter()
        .find(|d| d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

fn in_namespace<'a>(docs: &'a Docs, kind: &str, namespace: &str) -> &'a Value {
    let found: Vec<_> = find(docs, kind)
        .into_iter()
        .filter(|d| d["metadata"]["namespace"] == namespace)
        .collect();
    assert_eq!(found.len(), 1, "expected exactly one {kind} in {namespace}");
    found[0]
}

fn str_at<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no string at {pointer} in {value}"))
}

/// The apiGroup standing for non-resource URLs in [`grants`].
const NON_RESOURCE: &str = "<nonResourceURL>";

type Grant = (String, String, String, String);

/// (apiGroup, resource, resourceName or "*", verb) for every permission a
/// role grants; a non-resource URL is (NON_RESOURCE, url, "*", verb).
fn grants(role: &Value) -> BTreeSet<Grant> {
    let mut out = BTreeSet::new();
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| a.iter().map(|s| s.as_str().unwrap().to_string()).collect())
            .unwrap_or_default()
    };
    for rule in role["rules"].as_array().unwrap() {
        let verbs = strings(&rule["verbs"]);
        for verb in &verbs {
            assert_ne!(verb, "*", "wildcard verbs are not least privilege");
        }
        let names = match strings(&rule["resourceNames"]) {
            n if n.is_empty() => vec!["*".to_string()],
            n => n,
        };
        for group in strings(&rule["apiGroups"]) {
            for resource in strings(&rule["resources"]) {
                assert_ne!(resource, "*", "wildcard resources are not least privilege");
                for name in &names {
                    for verb in &verbs {
                        out.insert((group.clone(), resource.clone(), name.clone(), verb.clone()));
                    }
                }
            }
        }
        for url in strings(&rule["nonResourceURLs"]) {
            for verb in &verbs {
                out.insert((NON_RESOURCE.into(), url.clone(), "*".into(), verb.clone()));
            }
        }
    }
    out
}

fn expected(table: &[(&str, &str, &str, &[&str])]) -> BTreeSet<Grant> {
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

/// The owner kind's API group, its path prefix and its resource.
fn owner_of(binary: &str) -> (&'static str, &'static str, &'static str) {
    match binary {
        "replicaset-controller" => ("apps", "/apis/apps/v1", "replicasets"),
        _ => ("", "/api/v1", "replicationcontrollers"),
    }
}

/// What each binary calls on the objects it manages, and why (see also
/// the comments in rbac.yaml): a ClusterRole's rules for all namespaces, a
/// Role's in the watched namespace.
fn controller_rules_for(binary: &str) -> BTreeSet<Grant> {
    let (group, _, owners) = owner_of(binary);
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
        // KubePodControl's events (ctrlkit-events): core/v1, created then
        // patched to bump their count.
        ("", "events", "*", &["create", "patch"]),
        // The controller's own warnings through kube-runtime's Recorder:
        // events.k8s.io/v1, created then patched for series.
        ("events.k8s.io", "events", "*", &["create", "patch"]),
    ])
}

fn lease_role_for(binary: &str) -> BTreeSet<Grant> {
    // kube-lease-manager: create the Lease once, then get and patch it.
    expected(&[
        ("coordination.k8s.io", "leases", "*", &["create"]),
        ("coordination.k8s.io", "leases", binary, &["get", "patch"]),
    ])
}

/// The requests the binary sends when it watches `watched` (all
/// namespaces for `None`) and writes in `namespace`: (method, path,
/// query).
fn requests(binary: &str, watched: Option<&str>, namespace: &str) -> Vec<(String, String, String)> {
    let (_, api, owners) = owner_of(binary);
    let scope = watched
        .map(|ns| format!("namespaces/{ns}/"))
        .unwrap_or_default();
    let ns = format!("namespaces/{namespace}");
    let mut out = Vec::new();
    for query in ["", "watch=true&allowWatchBookmarks=true"] {
        out.push(("GET", format!("{api}/{scope}{owners}"), query));
        out.push(("GET", format!("/api/v1/{scope}pods"), query));
    }
    out.extend([
        ("GET", format!("{api}/{ns}/{owners}/web"), ""),
        ("PUT", format!("{api}/{ns}/{owners}/web/status"), ""),
        ("PUT", format!("{api}/{ns}/{owners}/web/finalizers"), ""),
        ("POST", format!("/api/v1/{ns}/pods"), ""),
        ("DELETE", format!("/api/v1/{ns}/pods/web-abcde"), ""),
        ("PATCH", format!("/api/v1/{ns}/pods/web-abcde"), ""),
        ("POST", format!("/api/v1/{ns}/events"), ""),
        ("PATCH", format!("/api/v1/{ns}/events/web.1"), ""),
        ("POST", format!("/apis/events.k8s.io/v1/{ns}/events"), ""),
        (
            "PATCH",
            format!("/apis/events.k8s.io/v1/{ns}/events/web.1"),
            "",
        ),
    ]);
    out.into_iter()
        .map(|(m, p, q)| (m.to_string(), p, q.to_string()))
        .collect()
}

fn lease_requests(binary: &str, lease_namespace: &str) -> Vec<(String, String)> {
    let leases = format!("/apis/coordination.k8s.io/v1/namespaces/{lease_namespace}/leases");
    vec![
        ("POST".into(), leases.clone()),
        ("GET".into(), format!("{leases}/{binary}")),
        ("PATCH".into(), format!("{leases}/{binary}")),
    ]
}

fn policy<'a>(docs: &[&'a Value]) -> Policy<'a> {
    let of = |kind: &str| docs.iter().copied().filter(|d| d["kind"] == kind).collect();
    Policy {
        roles: of("Role"),
        cluster_roles: of("ClusterRole"),
        role_bindings: of("RoleBinding"),
        cluster_role_bindings: of("ClusterRoleBinding"),
    }
}

fn service_account(namespace: &str, name: &str) -> UserInfo {
    let tokens = TokenRegistry::new();
    let token = tokens.issue_service_account(namespace, name);
    tokens
        .authenticate(Some(&format!("Bearer {token}")))
        .unwrap()
}

fn allowed(policy: &Policy<'_>, user: &UserInfo, method: &str, path: &str, query: &str) -> bool {
    policy
        .authorize(user, &resolve(method, path, query))
        .allowed()
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
    let docs = all_documents(&deploy_dir());
    assert!(docs.len() >= 26, "found only {} documents", docs.len());
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

/// The checks both variants share: ServiceAccount, bindings, lease Role,
/// Deployment.
fn check_common(binary: &str, docs: &Docs, namespace: &str, watched: Option<&str>) {
    let account = one(docs, "ServiceAccount");
    assert_eq!(str_at(account, "/metadata/name"), binary);
    assert_eq!(str_at(account, "/metadata/namespace"), namespace);

    // Every binding names the ServiceAccount, and a role of its kind that
    // exists, in its own namespace.
    for kind in ["RoleBinding", "ClusterRoleBinding"] {
        for binding in find(docs, kind) {
            let role_kind = str_at(binding, "/roleRef/kind");
            let role = named(docs, role_kind, str_at(binding, "/roleRef/name"));
            assert_eq!(
                (kind == "RoleBinding").then(|| &binding["metadata"]["namespace"]),
                (role_kind == "Role").then(|| &role["metadata"]["namespace"]),
                "{binary}: {binding}"
            );
            assert_eq!(str_at(binding, "/subjects/0/kind"), "ServiceAccount");
            assert_eq!(str_at(binding, "/subjects/0/name"), binary);
            assert_eq!(str_at(binding, "/subjects/0/namespace"), namespace);
        }
    }
    let lease_role = named(docs, "Role", &format!("{binary}-leader-election"));
    assert_eq!(str_at(lease_role, "/metadata/namespace"), namespace);
    assert_eq!(
        grants(lease_role),
        lease_role_for(binary),
        "{binary} lease Role"
    );

    // Deployment.
    let deployment = one(docs, "Deployment");
    assert_eq!(str_at(deployment, "/metadata/namespace"), namespace);
    assert_eq!(deployment["spec"]["replicas"], 1);
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(str_at(pod, "/serviceAccountName"), binary);
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
        .map(|a| a.as_str().unwrap().replace("$(POD_NAMESPACE)", namespace))
        .collect();
    let cli = Cli::try_parse_from(std::iter::once(binary.to_string()).chain(args))
        .unwrap_or_else(|e| panic!("{binary}: bad args: {e}"));
    let settings = cli.manager.config(binary);
    assert_eq!(settings.namespace.as_deref(), watched, "{binary}");
    let election = settings.leader_election.expect("leader election on");
    assert_eq!(election.lease_namespace, namespace);
    // The lease Role's resourceNames must name the lease the binary uses.
    assert!(
        grants(lease_role)
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

#[test]
fn cluster_wide_rbac_and_deployments_match_the_binaries() {
    // deploy/namespace.yaml holds the only Namespace; everything lives there.
    let all = all_documents(&deploy_dir());
    let namespace = str_at(one(&all, "Namespace"), "/metadata/name").to_string();

    for binary in BINARIES {
        let docs = documents(&deploy_dir().join(binary));
        check_common(binary, &docs, &namespace, None);
        let cluster_role = one(&docs, "ClusterRole");
        assert_eq!(
            grants(cluster_role),
            controller_rules_for(binary),
            "{binary} ClusterRole"
        );
        assert_eq!(
            str_at(one(&docs, "ClusterRoleBinding"), "/roleRef/name"),
            str_at(cluster_role, "/metadata/name")
        );

        // As the API server's RBAC authorizer sees it: everything the
        // binary does, in any namespace; the Lease only its own.
        let refs: Vec<&Value> = docs.iter().map(|(_, d)| d).collect();
        let policy = policy(&refs);
        let user = service_account(&namespace, binary);
        for (method, path, query) in requests(binary, None, "default") {
            assert!(
                allowed(&policy, &user, &method, &path, &query),
                "{binary}: {method} {path}"
            );
        }
        for (method, path) in lease_requests(binary, &namespace) {
            assert!(
                allowed(&policy, &user, &method, &path, ""),
                "{binary}: {method} {path}"
            );
        }
        let other_lease =
            format!("/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/other");
        assert!(!allowed(&policy, &user, "PATCH", &other_lease, ""));
        assert!(!allowed(&policy, &user, "GET", "/api/v1/secrets", ""));
    }
}

#[test]
fn namespaced_rbac_grants_the_same_rules_in_the_watched_namespace_only() {
    let all = all_documents(&deploy_dir());
    let namespace = str_at(one(&all, "Namespace"), "/metadata/name").to_string();

    for binary in BINARIES {
        let docs = documents(&deploy_dir().join(binary).join("namespaced"));
        check_common(binary, &docs, &namespace, Some(WATCHED));
        assert!(
            find(&docs, "ClusterRole").is_empty() && find(&docs, "ClusterRoleBinding").is_empty(),
            "{binary}: nothing cluster-scoped"
        );
        let role = in_namespace(&docs, "Role", WATCHED);
        assert_eq!(grants(role), controller_rules_for(binary), "{binary} Role");
        let binding = in_namespace(&docs, "RoleBinding", WATCHED);
        assert_eq!(
            str_at(binding, "/roleRef/name"),
            str_at(role, "/metadata/name")
        );

        // The same ServiceAccount and lease Role as the cluster-wide
        // variant, and the same Deployment but for --namespace.
        let cluster = documents(&deploy_dir().join(binary));
        for kind in ["ServiceAccount", "Deployment"] {
            let mut namespaced = one(&docs, kind).clone();
            if kind == "Deployment" {
                let args = namespaced
                    .pointer_mut("/spec/template/spec/containers/0/args")
                    .unwrap()
                    .as_array_mut()
                    .unwrap();
                let flag = json!(format!("--namespace={WATCHED}"));
                assert!(args.contains(&flag), "{binary}: {args:?}");
                args.retain(|a| *a != flag);
            }
            assert_eq!(&namespaced, one(&cluster, kind), "{binary} {kind}");
        }
        let lease_role = format!("{binary}-leader-election");
        assert_eq!(
            named(&docs, "Role", &lease_role),
            named(&cluster, "Role", &lease_role)
        );

        // As the API server's RBAC authorizer sees it: everything the
        // binary does with --namespace, and nothing outside that namespace
        // (so the binary must watch with --namespace, not cluster-wide).
        let refs: Vec<&Value> = docs.iter().map(|(_, d)| d).collect();
        let policy = policy(&refs);
        let user = service_account(&namespace, binary);
        for (method, path, query) in requests(binary, Some(WATCHED), WATCHED) {
            assert!(
                allowed(&policy, &user, &method, &path, &query),
                "{binary}: {method} {path}"
            );
        }
        for (method, path, query) in requests(binary, None, "default") {
            assert!(
                !allowed(&policy, &user, &method, &path, &query),
                "{binary}: {method} {path} must be denied"
            );
        }
        for (method, path) in lease_requests(binary, &namespace) {
            assert!(
                allowed(&policy, &user, &method, &path, ""),
                "{binary}: {method} {path}"
            );
        }
        for (method, path) in lease_requests(binary, WATCHED) {
            assert!(
                !allowed(&policy, &user, &method, &path, ""),
                "{binary}: {method} {path}"
            );
        }
    }
}

#[test]
fn secure_metrics_rbac_lets_the_controllers_review_and_readers_scrape() {
    let docs = documents(&deploy_dir().join("secure-metrics"));
    let auth_role = named(&docs, "ClusterRole", "ctrlkit:metrics-auth");
    // controller-runtime's filter (and the runtime's KubeMetricsAuth)
    // creates a TokenReview and a SubjectAccessReview per uncached scrape.
    assert_eq!(
        grants(auth_role),
        expected(&[
            ("authentication.k8s.io", "tokenreviews", "*", &["create"]),
            (
                "authorization.k8s.io",
                "subjectaccessreviews",
                "*",
                &["create"]
            ),
        ])
    );
    let reader = named(&docs, "ClusterRole", "ctrlkit:metrics-reader");
    assert_eq!(
        grants(reader),
        expected(&[(NON_RESOURCE, "/metrics", "*", &["get"])])
    );
    let binding = one(&docs, "ClusterRoleBinding");
    assert_eq!(str_at(binding, "/roleRef/name"), "ctrlkit:metrics-auth");

    // The subjects are the controllers' ServiceAccounts as deployed.
    let mut accounts = BTreeSet::new();
    for binary in BINARIES {
        let account = one(&documents(&deploy_dir().join(binary)), "ServiceAccount").clone();
        accounts.insert((
            str_at(&account, "/metadata/namespace").to_string(),
            str_at(&account, "/metadata/name").to_string(),
        ));
    }
    let subjects: BTreeSet<_> = binding["subjects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            assert_eq!(s["kind"], "ServiceAccount");
            (
                str_at(s, "/namespace").to_string(),
                str_at(s, "/name").to_string(),
            )
        })
        .collect();
    assert_eq!(subjects, accounts);

    // As the API server's RBAC authorizer sees it, with Prometheus bound
    // to the reader role as the file's header says.
    let prometheus_binding = json!({
        "kind": "ClusterRoleBinding", "metadata": {"name": "prometheus-ctrlkit-metrics"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "ctrlkit:metrics-reader"},
        "subjects": [{"kind": "ServiceAccount", "namespace": "monitoring", "name": "prometheus"}]});
    let mut refs: Vec<&Value> = docs.iter().map(|(_, d)| d).collect();
    refs.push(&prometheus_binding);
    let policy = policy(&refs);
    for (namespace, name) in &accounts {
        let controller = service_account(namespace, name);
        for path in [
            "/apis/authentication.k8s.io/v1/tokenreviews",
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        ] {
            assert!(
                allowed(&policy, &controller, "POST", path, ""),
                "{name}: {path}"
            );
        }
        assert!(!allowed(&policy, &controller, "GET", "/metrics", ""));
    }
    let prometheus = service_account("monitoring", "prometheus");
    assert!(allowed(&policy, &prometheus, "GET", "/metrics", ""));
    assert!(!allowed(&policy, &prometheus, "POST", "/metrics", ""));
    assert!(!allowed(&policy, &prometheus, "GET", "/debug/pprof", ""));
    let stranger = service_account("default", "default");
    assert!(!allowed(&policy, &stranger, "GET", "/metrics", ""));
}

#[test]
fn the_images_are_built_locked_from_pinned_bases_with_a_small_context() {
    let root = deploy_dir().join("..");
    let is_digest = |d: &str| d.len() == 64 && d.bytes().all(|b| b.is_ascii_hexdigit());
    for file in ["Dockerfile", "webapp-operator/Dockerfile"] {
        let dockerfile = std::fs::read_to_string(deploy_dir().join(file)).unwrap();
        // Every base image, directly or through a default ARG, is pinned.
        let mut bases = 0;
        for line in dockerfile.lines() {
            let image = match line.split_whitespace().collect::<Vec<_>>()[..] {
                ["FROM", image, ..] if !image.starts_with("${") => image.to_string(),
                ["ARG", arg] if arg.contains("_IMAGE=") => {
                    arg.split_once('=').unwrap().1.to_string()
                }
                _ => continue,
            };
            bases += 1;
            let digest = image
                .split_once("@sha256:")
                .unwrap_or_else(|| panic!("{file}: {image} is not pinned by digest"))
                .1;
            assert!(is_digest(digest), "{file}: {image}");
        }
        assert_eq!(bases, 2, "{file}: the builder and the runtime image");
        let build = cargo_build_command(&dockerfile);
        assert!(build.contains("--locked"), "{file}: {build}");
    }

    let ignore = std::fs::read_to_string(root.join(".dockerignore")).unwrap();
    let patterns: Vec<&str> = ignore
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    for needed in ["target", ".git"] {
        assert!(patterns.contains(&needed), "{needed} not ignored");
    }
    // Nothing the build needs is ignored: the sources, manifests, lock
    // file and the READMEs some crates include as docs.
    for kept in ["Cargo.lock", "Cargo.toml", "crates", "examples", "benches"] {
        assert!(
            !patterns.iter().any(|p| p.trim_end_matches('/') == kept),
            "{kept} is needed by the build"
        );
    }
    assert!(
        !patterns
            .iter()
            .any(|p| p.contains(".md") || p.contains(".rs"))
    );
}

#[test]
fn sharded_deployment_runs_three_ring_members_with_lease_rbac_in_its_namespace() {
    let binary = "replicaset-controller";
    let all = all_documents(&deploy_dir());
    let namespace = str_at(one(&all, "Namespace"), "/metadata/name").to_string();
    let docs = documents(&deploy_dir().join("replicaset-controller-sharded"));

    let account = one(&docs, "ServiceAccount");
    assert_eq!(str_at(account, "/metadata/name"), binary);
    assert_eq!(str_at(account, "/metadata/namespace"), namespace);
    assert_eq!(
        grants(one(&docs, "ClusterRole")),
        controller_rules_for(binary),
        "the controller's rules do not change with sharding"
    );
    let ring_role = named(&docs, "Role", &format!("{binary}-shard-ring"));
    assert_eq!(str_at(ring_role, "/metadata/namespace"), namespace);
    // The member's Lease informer (list, watch), its Lease (create, patch
    // to renew and claim), leaving (delete). No leader-election Lease.
    assert_eq!(
        grants(ring_role),
        expected(&[(
            "coordination.k8s.io",
            "leases",
            "*",
            &["list", "watch", "create", "patch", "delete"],
        )])
    );
    assert!(find(&docs, "Role").len() == 1, "only the ring's Role");

    // Three replicas, sharded, no leader election; the identity is the pod
    // name, the Leases in the pod's namespace.
    let deployment = one(&docs, "Deployment");
    assert_eq!(str_at(deployment, "/metadata/namespace"), namespace);
    assert_eq!(deployment["spec"]["replicas"], 3);
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(str_at(pod, "/serviceAccountName"), binary);
    let container = &pod["containers"][0];
    assert!(str_at(container, "/command/0").ends_with(&format!("/{binary}")));
    let env = |name: &str| {
        container["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .map(|e| str_at(e, "/valueFrom/fieldRef/fieldPath").to_owned())
            .unwrap_or_else(|| panic!("no env {name}"))
    };
    assert_eq!(env("POD_NAMESPACE"), "metadata.namespace");
    assert_eq!(env("POD_NAME"), "metadata.name");
    let pod_name = "replicaset-controller-7d9f8b6c5-x2x4q";
    let args: Vec<String> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            a.as_str()
                .unwrap()
                .replace("$(POD_NAMESPACE)", &namespace)
                .replace("$(POD_NAME)", pod_name)
        })
        .collect();
    let cli = Cli::try_parse_from(std::iter::once(binary.to_string()).chain(args))
        .unwrap_or_else(|e| panic!("bad args: {e}"));
    let settings = cli.manager.config(binary);
    assert_eq!(settings.validate(), Ok(()));
    assert!(settings.leader_election.is_none());
    assert_eq!(settings.namespace, None, "all namespaces");
    let sharding = settings.sharding.expect("--shard-ring");
    assert_eq!(sharding.ring, binary);
    assert_eq!(sharding.namespace, namespace);
    assert_eq!(sharding.identity, pod_name);
    let lease = sharding.shard_config().lease_name();

    // As the API server's RBAC authorizer sees it.
    let refs: Vec<&Value> = docs.iter().map(|(_, d)| d).collect();
    let policy = policy(&refs);
    let user = service_account(&namespace, binary);
    for (method, path, query) in requests(binary, None, "default") {
        assert!(
            allowed(&policy, &user, &method, &path, &query),
            "{method} {path}"
        );
    }
    let leases = format!("/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases");
    let selector = format!("labelSelector=ctrlkit.io%2Fshard-ring%3D{binary}");
    for (method, path, query) in [
        ("GET", leases.clone(), selector.clone()),
        (
            "GET",
            leases.clone(),
            format!("{selector}&watch=true&allowWatchBookmarks=true"),
        ),
        ("POST", leases.clone(), String::new()),
        ("PATCH", format!("{leases}/{lease}"), String::new()),
        ("DELETE", format!("{leases}/{lease}"), String::new()),
    ] {
        assert!(
            allowed(&policy, &user, method, &path, &query),
            "{method} {path}?{query}"
        );
    }
    let elsewhere = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases";
    assert!(!allowed(&policy, &user, "POST", elsewhere, ""));
    assert!(!allowed(&policy, &user, "GET", "/api/v1/secrets", ""));
}

/// Each image's `RUN cargo build`, continuation lines joined.
fn cargo_build_command(dockerfile: &str) -> String {
    let joined = dockerfile.replace("\\\n", " ");
    joined
        .lines()
        .find(|l| l.trim_start().starts_with("RUN cargo build"))
        .unwrap_or_else(|| panic!("no `RUN cargo build` in\n{dockerfile}"))
        .to_owned()
}

#[test]
fn the_images_install_the_binaries_their_profile_built() {
    let root = deploy_dir().join("..");
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    for file in ["Dockerfile", "webapp-operator/Dockerfile"] {
        let dockerfile = std::fs::read_to_string(deploy_dir().join(file)).unwrap();
        let run = cargo_build_command(&dockerfile);
        let words: Vec<&str> = run.split_whitespace().collect();
        let profile = words
            .windows(2)
            .find(|w| w[0] == "--profile")
            .map(|w| w[1])
            .unwrap_or_else(|| panic!("{file}: the image names its profile: {run}"));
        // The images are the size-optimised build (docs/performance.md, 3j).
        assert_eq!(profile, "dist", "{file}");
        assert!(
            manifest.contains(&format!("[profile.{profile}]")),
            "{file}: Cargo.toml defines no profile {profile}"
        );
        let installed: Vec<&str> = words
            .iter()
            .filter(|w| w.starts_with("target/"))
            .copied()
            .collect();
        assert!(!installed.is_empty(), "{file}: installs nothing: {run}");
        for path in installed {
            assert!(
                path.starts_with(&format!("target/{profile}/")),
                "{file}: {path} is not what --profile {profile} builds"
            );
        }
    }
}
