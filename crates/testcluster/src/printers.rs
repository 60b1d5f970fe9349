//! Server-side Table columns of the built-in kinds: the columns and cells
//! of kube-apiserver's printers (pkg/printers/internalversion) as kubectl
//! 1.32 shows them; priority 1 columns are the `-o wide` ones.

use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

use crate::json::At;
use crate::resources::Column;

/// `<none>`, kube-apiserver's text for an empty cell.
const NONE: &str = "<none>";

fn s<'a>(obj: &'a Value, path: &[&str]) -> &'a str {
    obj.at(path).and_then(Value::as_str).unwrap_or("")
}

fn int(obj: &Value, path: &[&str]) -> i64 {
    obj.at(path).and_then(Value::as_i64).unwrap_or(0)
}

fn arr<'a>(obj: &'a Value, path: &[&str]) -> &'a [Value] {
    obj.at(path)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn or_none(text: String) -> Value {
    if text.is_empty() {
        json!(NONE)
    } else {
        json!(text)
    }
}

/// Go's zero `time.Time`: 0001-01-01T00:00:00Z.
pub(crate) fn go_zero_time() -> Timestamp {
    // 62135596800 seconds separate year 1 from the Unix epoch.
    Timestamp::from_second(-62_135_596_800).unwrap_or(Timestamp::MIN)
}

/// Go's `time.Parse(time.RFC3339, s)`: `YYYY-MM-DDTHH:MM:SS`, an optional
/// fraction, then `Z` or `±HH:MM`.
pub(crate) fn parse_rfc3339(s: &str) -> Option<Timestamp> {
    let b = s.as_bytes();
    let digits = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = s.get(range)?;
        if part.is_empty() || !part.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        part.parse().ok()
    };
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let (year, month, day) = (digits(0..4)?, digits(5..7)?, digits(8..10)?);
    let (hour, minute, second) = (digits(11..13)?, digits(14..16)?, digits(17..19)?);
    let mut rest = &s[19..];
    let mut nanos: i64 = 0;
    if let Some(fraction) = rest.strip_prefix(['.', ',']) {
        let len = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if len == 0 {
            return None;
        }
        let kept = &fraction[..len.min(9)];
        nanos = kept.parse::<i64>().ok()? * 10_i64.pow(9 - kept.len() as u32);
        rest = &fraction[len..];
    }
    let offset_seconds = match rest.as_bytes() {
        b"Z" => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let two = |a: u8, b: u8| -> Option<i64> {
                (a.is_ascii_digit() && b.is_ascii_digit())
                    .then(|| i64::from(a - b'0') * 10 + i64::from(b - b'0'))
            };
            let (h, m) = (two(*h1, *h2)?, two(*m1, *m2)?);
            if h > 24 || m > 60 {
                return None;
            }
            let total = h * 3600 + m * 60;
            if *sign == b'-' { -total } else { total }
        }
        _ => return None,
    };
    let date = jiff::civil::Date::new(
        i16::try_from(year).ok()?,
        i8::try_from(month).ok()?,
        i8::try_from(day).ok()?,
    )
    .ok()?;
    let time = jiff::civil::Time::new(
        i8::try_from(hour).ok()?,
        i8::try_from(minute).ok()?,
        i8::try_from(second).ok()?,
        i32::try_from(nanos).ok()?,
    )
    .ok()?;
    let offset = jiff::tz::Offset::from_seconds(i32::try_from(offset_seconds).ok()?).ok()?;
    offset.to_timestamp(date.to_datetime(time)).ok()
}

/// apimachinery's `duration.HumanDuration`: about two significant figures
/// (`45s`, `3m5s`, `25m`, `4h10m`, `3d2h`, `400d`, `2y30d`).
pub(crate) fn human_duration(d: SignedDuration) -> String {
    let seconds = d.as_secs();
    if seconds < -1 {
        return "<invalid>".to_string();
    }
    if seconds < 0 {
        return "0s".to_string();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// The age of a timestamp as kube-apiserver's printers show it
/// (`translateTimestampSince`): `<unknown>` for a missing or zero time.
pub(crate) fn since(ts: &str, now: jiff::Timestamp) -> String {
    match parse_rfc3339(ts) {
        Some(t) if t != go_zero_time() => human_duration(now.duration_since(t)),
        _ => "<unknown>".into(),
    }
}

fn column(
    name: &str,
    kind: &str,
    priority: u32,
    description: &str,
    cell: impl Fn(&Value, jiff::Timestamp) -> Value + Send + Sync + 'static,
) -> Column {
    Column {
        name: name.into(),
        kind: kind.into(),
        format: if name == "Name" {
            "name".into()
        } else {
            String::new()
        },
        description: description.into(),
        priority,
        cell: Arc::new(cell),
    }
}

fn name_col() -> Column {
    column(
        "Name",
        "string",
        0,
        "Name must be unique within a namespace.",
        |o, _| json!(s(o, &["metadata", "name"])),
    )
}

fn age_col() -> Column {
    column(
        "Age",
        "string",
        0,
        "CreationTimestamp is a timestamp representing the server time when this object was created.",
        |o, now| json!(since(s(o, &["metadata", "creationTimestamp"]), now)),
    )
}

fn created_at_col() -> Column {
    column(
        "Created At",
        "date",
        0,
        "CreationTimestamp is a timestamp representing the server time when this object was created.",
        |o, _| json!(s(o, &["metadata", "creationTimestamp"])),
    )
}

fn int_col(name: &str, path: &'static [&'static str], description: &str) -> Column {
    column(name, "integer", 0, description, move |o, _| {
        json!(int(o, path))
    })
}

/// `metav1.FormatLabelSelector`: `a=b,c in (d)`, `<none>` when empty.
fn format_selector(sel: Option<&Value>) -> String {
    let Some(sel) = sel else {
        return NONE.into();
    };
    let mut parts = Vec::new();
    if let Some(m) = sel.get("matchLabels").and_then(Value::as_object) {
        for (k, v) in m {
            parts.push(format!("{k}={}", v.as_str().unwrap_or("")));
        }
    }
    for e in sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = s(e, &["key"]);
        let values: Vec<&str> = arr(e, &["values"])
            .iter()
            .filter_map(Value::as_str)
            .collect();
        match s(e, &["operator"]) {
            "In" => parts.push(format!("{key} in ({})", values.join(","))),
            "NotIn" => parts.push(format!("{key} notin ({})", values.join(","))),
            "Exists" => parts.push(key.to_string()),
            "DoesNotExist" => parts.push(format!("!{key}")),
            _ => {}
        }
    }
    if parts.is_empty() {
        NONE.into()
    } else {
        parts.join(",")
    }
}

/// `labels.FormatLabels` of a string map: `a=b,c=d`, `<none>` when empty.
fn format_labels(map: Option<&Value>) -> String {
    let parts: Vec<String> = map
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
        .collect();
    if parts.is_empty() {
        NONE.into()
    } else {
        parts.join(",")
    }
}

/// Containers, Images and Selector columns of a workload with a pod template.
fn template_cols(spec: &'static [&'static str], selector: bool, label_map: bool) -> Vec<Column> {
    let containers = move |o: &Value, field: &str| {
        let mut path: Vec<&str> = spec.to_vec();
        path.extend(["template", "spec", "containers"]);
        arr(o, &path)
            .iter()
            .map(|c| s(c, &[field]).to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    let mut cols = vec![
        column(
            "Containers",
            "string",
            1,
            "Names of each container in the template.",
            move |o, _| json!(containers(o, "name")),
        ),
        column(
            "Images",
            "string",
            1,
            "Images referenced by each container in the template.",
            move |o, _| json!(containers(o, "image")),
        ),
    ];
    if selector {
        cols.push(column(
            "Selector",
            "string",
            1,
            "A label query over pods that should match the replicas count.",
            move |o, _| {
                let mut path: Vec<&str> = spec.to_vec();
                path.push("selector");
                if label_map {
                    json!(format_labels(o.at(&path)))
                } else {
                    json!(format_selector(o.at(&path)))
                }
            },
        ));
    }
    cols
}

fn pod_status(o: &Value) -> String {
    let mut reason = s(o, &["status", "phase"]).to_string();
    if !s(o, &["status", "reason"]).is_empty() {
        reason = s(o, &["status", "reason"]).to_string();
    }
    let mut initializing = false;
    let inits = arr(o, &["status", "initContainerStatuses"]);
    for (i, c) in inits.iter().enumerate() {
        if c.at(&["state", "terminated"])
            .is_some_and(|t| int(t, &["exitCode"]) == 0)
        {
            continue;
        }
        initializing = true;
        if let Some(t) = c.at(&["state", "terminated"]) {
            reason = if s(t, &["reason"]).is_empty() {
                format!("Init:ExitCode:{}", int(t, &["exitCode"]))
            } else {
                format!("Init:{}", s(t, &["reason"]))
            };
        } else if let Some(w) = c
            .at(&["state", "waiting"])
            .filter(|w| !s(w, &["reason"]).is_empty() && s(w, &["reason"]) != "PodInitializing")
        {
            reason = format!("Init:{}", s(w, &["reason"]));
        } else {
            reason = format!("Init:{i}/{}", arr(o, &["spec", "initContainers"]).len());
        }
        break;
    }
    if !initializing {
        let mut has_running = false;
        for c in arr(o, &["status", "containerStatuses"]).iter().rev() {
            if let Some(w) = c
                .at(&["state", "waiting"])
                .filter(|w| !s(w, &["reason"]).is_empty())
            {
                reason = s(w, &["reason"]).to_string();
            } else if let Some(t) = c.at(&["state", "terminated"]) {
                reason = if !s(t, &["reason"]).is_empty() {
                    s(t, &["reason"]).to_string()
                } else if int(t, &["signal"]) != 0 {
                    format!("Signal:{}", int(t, &["signal"]))
                } else {
                    format!("ExitCode:{}", int(t, &["exitCode"]))
                };
            } else if c.at(&["ready"]).and_then(Value::as_bool) == Some(true)
                && c.at(&["state", "running"]).is_some()
            {
                has_running = true;
            }
        }
        if reason == "Completed" && has_running {
            reason = "Running".into();
        }
    }
    if o.at(&["metadata", "deletionTimestamp"]).is_some() {
        reason = if s(o, &["status", "reason"]) == "NodeLost" {
            "Unknown".into()
        } else {
            "Terminating".into()
        };
    }
    reason
}

fn pods() -> Vec<Column> {
    vec![
        name_col(),
        column(
            "Ready",
            "string",
            0,
            "The aggregate readiness state of this pod for accepting traffic.",
            |o, _| {
                let total = arr(o, &["spec", "containers"]).len();
                let ready = arr(o, &["status", "containerStatuses"])
                    .iter()
                    .filter(|c| c.get("ready").and_then(Value::as_bool) == Some(true))
                    .count();
                json!(format!("{ready}/{total}"))
            },
        ),
        column(
            "Status",
            "string",
            0,
            "The aggregate status of the containers in this pod.",
            |o, _| json!(pod_status(o)),
        ),
        column(
            "Restarts",
            "string",
            0,
            "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
            |o, _| {
                let restarts: i64 = arr(o, &["status", "containerStatuses"])
                    .iter()
                    .map(|c| int(c, &["restartCount"]))
                    .sum();
                json!(restarts.to_string())
            },
        ),
        age_col(),
        column(
            "IP",
            "string",
            1,
            "IP address allocated to the pod.",
            |o, _| or_none(s(o, &["status", "podIP"]).into()),
        ),
        column(
            "Node",
            "string",
            1,
            "NodeName is a request to schedule this pod onto a specific node.",
            |o, _| or_none(s(o, &["spec", "nodeName"]).into()),
        ),
        column(
            "Nominated Node",
            "string",
            1,
            "nominatedNodeName is set only when this pod preempts other pods on the node.",
            |o, _| or_none(s(o, &["status", "nominatedNodeName"]).into()),
        ),
        column(
            "Readiness Gates",
            "string",
            1,
            "If specified, all readiness gates will be evaluated for pod readiness.",
            |o, _| {
                let gates = arr(o, &["spec", "readinessGates"]);
                if gates.is_empty() {
                    return json!(NONE);
                }
                let conditions = arr(o, &["status", "conditions"]);
                let met = gates
                    .iter()
                    .filter(|g| {
                        conditions.iter().any(|c| {
                            s(c, &["type"]) == s(g, &["conditionType"])
                                && s(c, &["status"]) == "True"
                        })
                    })
                    .count();
                json!(format!("{met}/{}", gates.len()))
            },
        ),
    ]
}

fn replicated(label_map: bool) -> Vec<Column> {
    let mut cols = vec![
        name_col(),
        int_col(
            "Desired",
            &["spec", "replicas"],
            "Replicas is the number of desired replicas.",
        ),
        int_col(
            "Current",
            &["status", "replicas"],
            "Replicas is the most recently observed number of replicas.",
        ),
        int_col(
            "Ready",
            &["status", "readyReplicas"],
            "The number of ready replicas for this replica set.",
        ),
        age_col(),
    ];
    cols.extend(template_cols(&["spec"], true, label_map));
    cols
}

fn ready_of_desired(o: &Value) -> Value {
    json!(format!(
        "{}/{}",
        int(o, &["status", "readyReplicas"]),
        int(o, &["spec", "replicas"])
    ))
}

fn deployments() -> Vec<Column> {
    let mut cols = vec![
        name_col(),
        column(
            "Ready",
            "string",
            0,
            "Number of the pod with ready state",
            |o, _| ready_of_desired(o),
        ),
        int_col(
            "Up-to-date",
            &["status", "updatedReplicas"],
            "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
        ),
        int_col(
            "Available",
            &["status", "availableReplicas"],
            "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
        ),
        age_col(),
    ];
    cols.extend(template_cols(&["spec"], true, false));
    cols
}

fn statefulsets() -> Vec<Column> {
    let mut cols = vec![
        name_col(),
        column(
            "Ready",
            "string",
            0,
            "Number of the pod with ready state",
            |o, _| ready_of_desired(o),
        ),
        age_col(),
    ];
    cols.extend(template_cols(&["spec"], false, false));
    cols
}

fn daemonsets() -> Vec<Column> {
    let mut cols = vec![
        name_col(),
        int_col(
            "Desired",
            &["status", "desiredNumberScheduled"],
            "The total number of nodes that should be running the daemon pod.",
        ),
        int_col(
            "Current",
            &["status", "currentNumberScheduled"],
            "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod.",
        ),
        int_col(
            "Ready",
            &["status", "numberReady"],
            "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and ready.",
        ),
        int_col(
            "Up-to-date",
            &["status", "updatedNumberScheduled"],
            "The total number of nodes that are running updated daemon pod",
        ),
        int_col(
            "Available",
            &["status", "numberAvailable"],
            "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available.",
        ),
        column(
            "Node Selector",
            "string",
            0,
            "NodeSelector is a selector which must be true for the pod to fit on a node.",
            |o, _| {
                json!(format_labels(o.at(&[
                    "spec",
                    "template",
                    "spec",
                    "nodeSelector"
                ])))
            },
        ),
        age_col(),
    ];
    cols.extend(template_cols(&["spec"], true, false));
    cols
}

fn condition_true(o: &Value, kind: &str) -> bool {
    arr(o, &["status", "conditions"])
        .iter()
        .any(|c| s(c, &["type"]) == kind && s(c, &["status"]) == "True")
}

fn jobs() -> Vec<Column> {
    let mut cols = vec![
        name_col(),
        column("Status", "string", 0, "Status of the job.", |o, _| {
            let status = [
                "Failed",
                "Complete",
                "Suspended",
                "FailureTarget",
                "SuccessCriteriaMet",
            ]
            .into_iter()
            .find(|c| condition_true(o, c))
            .unwrap_or("Running");
            json!(status)
        }),
        column(
            "Completions",
            "string",
            0,
            "The completion status of the job.",
            |o, _| {
                let succeeded = int(o, &["status", "succeeded"]);
                let text = match o.at(&["spec", "completions"]).and_then(Value::as_i64) {
                    Some(c) => format!("{succeeded}/{c}"),
                    None => {
                        let p = o
                            .at(&["spec", "parallelism"])
                            .and_then(Value::as_i64)
                            .unwrap_or(0);
                        if p > 1 {
                            format!("{succeeded}/1 of {p}")
                        } else {
                            format!("{succeeded}/1")
                        }
                    }
                };
                json!(text)
            },
        ),
        column(
            "Duration",
            "string",
            0,
            "Time required to complete the job.",
            |o, now| {
                let Some(start) = parse_rfc3339(s(o, &["status", "startTime"])) else {
                    return json!("");
                };
                let end = parse_rfc3339(s(o, &["status", "completionTime"])).unwrap_or(now);
                json!(human_duration(end.duration_since(start)))
            },
        ),
        age_col(),
    ];
    cols.extend(template_cols(&["spec"], true, false));
    cols
}

fn cronjobs() -> Vec<Column> {
    let mut cols = vec![
        name_col(),
        column(
            "Schedule",
            "string",
            0,
            "The schedule in Cron format.",
            |o, _| json!(s(o, &["spec", "schedule"])),
        ),
        column(
            "Timezone",
            "string",
            0,
            "The time zone name for the given schedule.",
            |o, _| or_none(s(o, &["spec", "timeZone"]).into()),
        ),
        column(
            "Suspend",
            "boolean",
            0,
            "This flag tells the controller to suspend subsequent executions.",
            |o, _| {
                json!(
                    o.at(&["spec", "suspend"])
                        .and_then(Value::as_bool)
                        .unwrap_or(false)
                )
            },
        ),
        column(
            "Active",
            "integer",
            0,
            "A list of pointers to currently running jobs.",
            |o, _| json!(arr(o, &["status", "active"]).len()),
        ),
        column(
            "Last Schedule",
            "string",
            0,
            "Information when was the last time the job was successfully scheduled.",
            |o, now| match s(o, &["status", "lastScheduleTime"]) {
                "" => json!(NONE),
                t => json!(since(t, now)),
            },
        ),
        age_col(),
    ];
    cols.extend(template_cols(&["spec", "jobTemplate", "spec"], true, false));
    cols
}

fn services() -> Vec<Column> {
    vec![
        name_col(),
        column(
            "Type",
            "string",
            0,
            "type determines how the Service is exposed.",
            |o, _| json!(s(o, &["spec", "type"])),
        ),
        column(
            "Cluster-IP",
            "string",
            0,
            "clusterIP is the IP address of the service.",
            |o, _| or_none(s(o, &["spec", "clusterIP"]).into()),
        ),
        column(
            "External-IP",
            "string",
            0,
            "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.",
            |o, _| {
                let external: Vec<&str> = arr(o, &["spec", "externalIPs"])
                    .iter()
                    .filter_map(Value::as_str)
                    .collect();
                match s(o, &["spec", "type"]) {
                    "ExternalName" => json!(s(o, &["spec", "externalName"])),
                    "LoadBalancer" => {
                        let ingress: Vec<&str> = arr(o, &["status", "loadBalancer", "ingress"])
                            .iter()
                            .map(|i| {
                                if s(i, &["ip"]).is_empty() {
                                    s(i, &["hostname"])
                                } else {
                                    s(i, &["ip"])
                                }
                            })
                            .chain(external.iter().copied())
                            .collect();
                        if ingress.is_empty() {
                            json!("<pending>")
                        } else {
                            json!(ingress.join(","))
                        }
                    }
                    _ => or_none(external.join(",")),
                }
            },
        ),
        column(
            "Port(s)",
            "string",
            0,
            "The list of ports that are exposed by this service.",
            |o, _| {
                let ports: Vec<String> = arr(o, &["spec", "ports"])
                    .iter()
                    .map(|p| {
                        let proto = match s(p, &["protocol"]) {
                            "" => "TCP",
                            x => x,
                        };
                        match p.get("nodePort").and_then(Value::as_i64) {
                            Some(n) if n > 0 => format!("{}:{n}/{proto}", int(p, &["port"])),
                            _ => format!("{}/{proto}", int(p, &["port"])),
                        }
                    })
                    .collect();
                or_none(ports.join(","))
            },
        ),
        age_col(),
        column(
            "Selector",
            "string",
            1,
            "Route service traffic to pods with label keys and values matching this selector.",
            |o, _| json!(format_labels(o.at(&["spec", "selector"]))),
        ),
    ]
}

fn endpoints() -> Vec<Column> {
    vec![
        name_col(),
        column(
            "Endpoints",
            "string",
            0,
            "Endpoints of the service.",
            |o, _| {
                let mut out = Vec::new();
                for subset in arr(o, &["subsets"]) {
                    let ports: Vec<i64> = arr(subset, &["ports"])
                        .iter()
                        .map(|p| int(p, &["port"]))
                        .collect();
                    for a in arr(subset, &["addresses"]) {
                        if ports.is_empty() {
                            out.push(s(a, &["ip"]).to_string());
                        }
                        for p in &ports {
                            out.push(format!("{}:{p}", s(a, &["ip"])));
                        }
                    }
                }
                or_none(out.join(","))
            },
        ),
        age_col(),
    ]
}

fn endpointslices() -> Vec<Column> {
    vec![
        name_col(),
        column(
            "AddressType",
            "string",
            0,
            "addressType specifies the type of address carried by this EndpointSlice.",
            |o, _| json!(s(o, &["addressType"])),
        ),
        column(
            "Ports",
            "string",
            0,
            "ports specifies the list of network ports exposed by each endpoint in this slice.",
            |o, _| {
                let ports: Vec<String> = arr(o, &["ports"])
                    .iter()
                    .map(|p| int(p, &["port"]).to_string())
                    .collect();
                if ports.is_empty() {
                    json!("<unset>")
                } else {
                    json!(ports.join(","))
                }
            },
        ),
        column(
            "Endpoints",
            "string",
            0,
            "endpoints is a list of unique endpoints in this slice.",
            |o, _| {
                let addrs: Vec<&str> = arr(o, &["endpoints"])
                    .iter()
                    .flat_map(|e| arr(e, &["addresses"]))
                    .filter_map(Value::as_str)
                    .collect();
                if addrs.is_empty() {
                    json!("<unset>")
                } else {
                    json!(addrs.join(","))
                }
            },
        ),
        age_col(),
    ]
}

fn nodes() -> Vec<Column> {
    let address = |kind: &'static str| {
        move |o: &Value, _| {
            let a = arr(o, &["status", "addresses"])
                .iter()
                .find(|a| s(a, &["type"]) == kind);
            or_none(a.map_or("", |a| s(a, &["address"])).into())
        }
    };
    let info =
        |field: &'static str| move |o: &Value, _| json!(s(o, &["status", "nodeInfo", field]));
    vec![
        name_col(),
        column("Status", "string", 0, "The status of the node", |o, _| {
            let ready = arr(o, &["status", "conditions"])
                .iter()
                .find(|c| s(c, &["type"]) == "Ready");
            let mut status = match ready.map(|c| s(c, &["status"])) {
                Some("True") => "Ready".to_string(),
                Some(_) => "NotReady".to_string(),
                None => "Unknown".to_string(),
            };
            if o.at(&["spec", "unschedulable"]).and_then(Value::as_bool) == Some(true) {
                status.push_str(",SchedulingDisabled");
            }
            json!(status)
        }),
        column("Roles", "string", 0, "The roles of the node", |o, _| {
            let roles: Vec<&str> = o
                .at(&["metadata", "labels"])
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
                .filter_map(|(k, _)| k.strip_prefix("node-role.kubernetes.io/"))
                .filter(|r| !r.is_empty())
                .collect();
            or_none(roles.join(","))
        }),
        age_col(),
        column(
            "Version",
            "string",
            0,
            "Kubelet Version reported by the node.",
            info("kubeletVersion"),
        ),
        column(
            "Internal-IP",
            "string",
            1,
            "List of addresses reachable to the node.",
            address("InternalIP"),
        ),
        column(
            "External-IP",
            "string",
            1,
            "List of addresses reachable to the node.",
            address("ExternalIP"),
        ),
        column(
            "OS-Image",
            "string",
            1,
            "OS Image reported by the node from /etc/os-release.",
            info("osImage"),
        ),
        column(
            "Kernel-Version",
            "string",
            1,
            "Kernel Version reported by the node from 'uname -r'.",
            info("kernelVersion"),
        ),
        column(
            "Container-Runtime",
            "string",
            1,
            "ContainerRuntime Version reported by the node through runtime remote API.",
            info("containerRuntimeVersion"),
        ),
    ]
}

/// Core event columns (events.k8s.io events are printed from the same
/// stored core form).
fn events() -> Vec<Column> {
    let last_seen = |o: &Value, now| {
        let t = [
            s(o, &["series", "lastObservedTime"]),
            s(o, &["lastTimestamp"]),
            s(o, &["eventTime"]),
        ]
        .into_iter()
        .find(|t| !t.is_empty())
        .unwrap_or("");
        json!(since(t, now))
    };
    vec![
        column(
            "Last Seen",
            "string",
            0,
            "The time at which the most recent occurrence of this event was recorded.",
            last_seen,
        ),
        column(
            "Type",
            "string",
            0,
            "Type of this event (Normal, Warning), new types could be added in the future.",
            |o, _| json!(s(o, &["type"])),
        ),
        column(
            "Reason",
            "string",
            0,
            "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
            |o, _| json!(s(o, &["reason"])),
        ),
        column(
            "Object",
            "string",
            0,
            "The object that this event is about.",
            |o, _| {
                json!(format!(
                    "{}/{}",
                    s(o, &["involvedObject", "kind"]).to_ascii_lowercase(),
                    s(o, &["involvedObject", "name"])
                ))
            },
        ),
        column(
            "Subobject",
            "string",
            1,
            "The subobject that this event is about.",
            |o, _| json!(s(o, &["involvedObject", "fieldPath"])),
        ),
        column(
            "Source",
            "string",
            1,
            "The component reporting this event.",
            |o, _| {
                let (component, host) = match s(o, &["source", "component"]) {
                    "" => (s(o, &["reportingComponent"]), s(o, &["reportingInstance"])),
                    c => (c, s(o, &["source", "host"])),
                };
                json!(if host.is_empty() {
                    component.to_string()
                } else {
                    format!("{component}, {host}")
                })
            },
        ),
        column(
            "Message",
            "string",
            0,
            "A human-readable description of the status of this operation.",
            |o, _| json!(s(o, &["message"]).trim()),
        ),
        column(
            "First Seen",
            "string",
            1,
            "The time at which the event was first recorded.",
            |o, now| {
                let t = if s(o, &["firstTimestamp"]).is_empty() {
                    s(o, &["eventTime"])
                } else {
                    s(o, &["firstTimestamp"])
                };
                json!(since(t, now))
            },
        ),
        column(
            "Count",
            "string",
            1,
            "The number of times this event has occurred.",
            |o, _| {
                let count = o
                    .at(&["series", "count"])
                    .and_then(Value::as_i64)
                    .unwrap_or_else(|| int(o, &["count"]).max(1));
                json!(count.to_string())
            },
        ),
        column(
            "Name",
            "string",
            1,
            "Name must be unique within a namespace.",
            |o, _| json!(s(o, &["metadata", "name"])),
        ),
    ]
}

fn count_of(o: &Value, fields: &[&str]) -> usize {
    fields
        .iter()
        .map(|f| o.get(*f).and_then(Value::as_object).map_or(0, |m| m.len()))
        .sum()
}

fn claims() -> Vec<Column> {
    vec![
        name_col(),
        column(
            "Status",
            "string",
            0,
            "Phase represents the current phase of PersistentVolumeClaim.",
            |o, _| json!(s(o, &["status", "phase"])),
        ),
        column(
            "Volume",
            "string",
            0,
            "VolumeName is the binding reference to the PersistentVolume backing this claim.",
            |o, _| json!(s(o, &["spec", "volumeName"])),
        ),
        column(
            "Capacity",
            "string",
            0,
            "Capacity represents the actual resources of the underlying volume.",
            |o, _| json!(s(o, &["status", "capacity", "storage"])),
        ),
        column(
            "Access Modes",
            "string",
            0,
            "AccessModes contains the desired access modes the volume should have.",
            |o, _| {
                let short = |m: &str| {
                    match m {
                        "ReadWriteOnce" => "RWO",
                        "ReadOnlyMany" => "ROX",
                        "ReadWriteMany" => "RWX",
                        "ReadWriteOncePod" => "RWOP",
                        other => other,
                    }
                    .to_string()
                };
                let modes: Vec<String> = arr(o, &["status", "accessModes"])
                    .iter()
                    .filter_map(Value::as_str)
                    .map(short)
                    .collect();
                json!(modes.join(","))
            },
        ),
        column(
            "StorageClass",
            "string",
            0,
            "StorageClass of the pvc",
            |o, _| json!(s(o, &["spec", "storageClassName"])),
        ),
        column(
            "VolumeAttributesClass",
            "string",
            0,
            "VolumeAttributesClass of the pvc",
            |o, _| match s(o, &["spec", "volumeAttributesClassName"]) {
                "" => json!("<unset>"),
                c => json!(c),
            },
        ),
        age_col(),
        column(
            "VolumeMode",
            "string",
            1,
            "VolumeMode of the PVC",
            |o, _| json!(s(o, &["spec", "volumeMode"])),
        ),
    ]
}

fn quotas() -> Vec<Column> {
    let usage = |limits: bool| {
        move |o: &Value, _| {
            let hard = o
                .at(&["status", "hard"])
                .or_else(|| o.at(&["spec", "hard"]))
                .and_then(Value::as_object);
            let mut keys: Vec<&String> = hard
                .into_iter()
                .flat_map(|h| h.keys())
                .filter(|k| k.starts_with("limits.") == limits)
                .collect();
            keys.sort();
            let parts: Vec<String> = keys
                .into_iter()
                .map(|k| {
                    let used = o
                        .at(&["status", "used", k.as_str()])
                        .and_then(Value::as_str)
                        .unwrap_or("0");
                    let h = hard
                        .and_then(|h| h.get(k))
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    format!("{k}: {used}/{h}")
                })
                .collect();
            json!(parts.join(", "))
        }
    };
    vec![
        name_col(),
        age_col(),
        column(
            "Request",
            "string",
            0,
            "Request represents a minimum amount of cpu/memory that a container may consume.",
            usage(false),
        ),
        column(
            "Limit",
            "string",
            0,
            "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node.",
            usage(true),
        ),
    ]
}

fn bindings() -> Vec<Column> {
    let subjects = |kind: &'static str| {
        move |o: &Value, _| {
            let names: Vec<String> = arr(o, &["subjects"])
                .iter()
                .filter(|x| s(x, &["kind"]) == kind)
                .map(|x| {
                    if kind == "ServiceAccount" {
                        format!("{}/{}", s(x, &["namespace"]), s(x, &["name"]))
                    } else {
                        s(x, &["name"]).to_string()
                    }
                })
                .collect();
            json!(names.join(", "))
        }
    };
    vec![
        name_col(),
        column("Role", "string", 0, "Role of the binding.", |o, _| {
            json!(format!(
                "{}/{}",
                s(o, &["roleRef", "kind"]),
                s(o, &["roleRef", "name"])
            ))
        }),
        age_col(),
        column(
            "Users",
            "string",
            1,
            "Users in the binding.",
            subjects("User"),
        ),
        column(
            "Groups",
            "string",
            1,
            "Groups in the binding.",
            subjects("Group"),
        ),
        column(
            "ServiceAccounts",
            "string",
            1,
            "ServiceAccounts in the binding.",
            subjects("ServiceAccount"),
        ),
    ]
}

/// The Table columns of a built-in kind; empty gives the default table
/// (`Name`, `Created At`).
pub(crate) fn columns_for(group: &str, plural: &str) -> Vec<Column> {
    match (group, plural) {
        ("", "pods") => pods(),
        ("", "replicationcontrollers") => replicated(true),
        ("apps", "replicasets") => replicated(false),
        ("apps", "deployments") => deployments(),
        ("apps", "statefulsets") => statefulsets(),
        ("apps", "daemonsets") => daemonsets(),
        ("batch", "jobs") => jobs(),
        ("batch", "cronjobs") => cronjobs(),
        ("", "services") => services(),
        ("", "endpoints") => endpoints(),
        ("discovery.k8s.io", "endpointslices") => endpointslices(),
        ("", "nodes") => nodes(),
        ("", "events") | ("events.k8s.io", "events") => events(),
        ("", "namespaces") => vec![
            name_col(),
            column(
                "Status",
                "string",
                0,
                "The status of the namespace",
                |o, _| json!(s(o, &["status", "phase"])),
            ),
            age_col(),
        ],
        ("", "secrets") => vec![
            name_col(),
            column(
                "Type",
                "string",
                0,
                "Used to facilitate programmatic handling of secret data.",
                |o, _| json!(s(o, &["type"])),
            ),
            column(
                "Data",
                "integer",
                0,
                "Data contains the secret data.",
                |o, _| json!(count_of(o, &["data"])),
            ),
            age_col(),
        ],
        ("", "configmaps") => vec![
            name_col(),
            column(
                "Data",
                "integer",
                0,
                "Data contains the configuration data.",
                |o, _| json!(count_of(o, &["data", "binaryData"])),
            ),
            age_col(),
        ],
        ("", "serviceaccounts") => vec![
            name_col(),
            column(
                "Secrets",
                "string",
                0,
                "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use.",
                |o, _| json!(arr(o, &["secrets"]).len().to_string()),
            ),
            age_col(),
        ],
        ("", "persistentvolumeclaims") => claims(),
        ("", "resourcequotas") => quotas(),
        ("", "limitranges") | ("rbac.authorization.k8s.io", "roles" | "clusterroles") => {
            vec![name_col(), created_at_col()]
        }
        ("rbac.authorization.k8s.io", "rolebindings" | "clusterrolebindings") => bindings(),
        ("coordination.k8s.io", "leases") => vec![
            name_col(),
            column("Holder", "string", 0, "The holder of the lease.", |o, _| {
                json!(s(o, &["spec", "holderIdentity"]))
            }),
            age_col(),
        ],
        _ => Vec::new(),
    }
}

/// kube-apiserver's default columns for a kind without a printer.
pub(crate) fn default_columns() -> Vec<Column> {
    vec![name_col(), created_at_col()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_as_go_parses_it() {
        let t = |s: &str| parse_rfc3339(s).map(|t| t.as_second());
        assert_eq!(t("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(t("1970-01-01T01:00:00+01:00"), Some(0));
        assert_eq!(t("1970-01-01T00:00:01.5Z"), Some(1));
        assert_eq!(t("1970-01-01 00:00:00Z"), None);
        assert_eq!(t("1970-01-01T00:00Z"), None);
        assert_eq!(t("1970-02-30T00:00:00Z"), None);
        assert_eq!(t("1970-01-01T00:00:00"), None);
        assert_eq!(t("1970-01-01T00:00:00z"), None);
    }

    #[test]
    fn human_durations_match_apimachinery() {
        let h = |s: i64| human_duration(SignedDuration::from_secs(s));
        for (secs, text) in [
            (-2, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (119, "119s"),
            (120, "2m"),
            (185, "3m5s"),
            (600, "10m"),
            (179 * 60, "179m"),
            (3 * 3600, "3h"),
            (4 * 3600 + 600, "4h10m"),
            (8 * 3600, "8h"),
            (47 * 3600, "47h"),
            (48 * 3600, "2d"),
            (3 * 86400 + 7200, "3d2h"),
            (8 * 86400, "8d"),
            (729 * 86400, "729d"),
            (730 * 86400, "2y"),
            (760 * 86400, "2y30d"),
            (8 * 365 * 86400, "8y"),
        ] {
            assert_eq!(h(secs), text, "{secs}s");
        }
        // Go truncates a fractional negative second toward zero.
        assert_eq!(human_duration(SignedDuration::from_millis(-1500)), "0s");
    }

    fn cells(cols: &[Column], obj: &Value) -> Vec<Value> {
        let now: jiff::Timestamp = "2026-01-01T00:10:00Z".parse().unwrap();
        cols.iter().map(|c| (c.cell)(obj, now)).collect()
    }

    #[test]
    fn pod_cells_follow_the_pod_printer() {
        let pod = json!({
            "metadata": {"name": "web-1", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"nodeName": "node-1", "containers": [{"name": "a"}, {"name": "b"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.5", "containerStatuses": [
                {"name": "a", "ready": true, "restartCount": 1, "state": {"running": {}}},
                {"name": "b", "ready": false, "restartCount": 2, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}
        });
        assert_eq!(
            cells(&pods(), &pod),
            [
                json!("web-1"),
                json!("1/2"),
                json!("CrashLoopBackOff"),
                json!("3"),
                json!("10m"),
                json!("10.0.0.5"),
                json!("node-1"),
                json!("<none>"),
                json!("<none>")
            ]
        );
        let mut terminating = pod.clone();
        terminating["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:09:00Z");
        assert_eq!(cells(&pods(), &terminating)[2], "Terminating");
    }

    #[test]
    fn workload_cells_show_replicas_containers_and_selectors() {
        let rs = json!({
            "metadata": {"name": "web", "creationTimestamp": "2026-01-01T00:09:30Z"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"spec": {"containers": [{"name": "app", "image": "nginx:1.27"}, {"name": "side", "image": "busybox"}]}}},
            "status": {"replicas": 3, "readyReplicas": 2}
        });
        assert_eq!(
            cells(&replicated(false), &rs),
            [
                json!("web"),
                json!(3),
                json!(3),
                json!(2),
                json!("30s"),
                json!("app,side"),
                json!("nginx:1.27,busybox"),
                json!("app=web")
            ]
        );
        assert_eq!(cells(&deployments(), &rs)[1], "2/3");
        let svc = json!({"metadata": {"name": "s"}, "spec": {"type": "NodePort", "clusterIP": "10.96.0.10",
                         "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]}});
        let c = cells(&services(), &svc);
        assert_eq!(
            c[1..5],
            [
                json!("NodePort"),
                json!("10.96.0.10"),
                json!("<none>"),
                json!("80:30080/TCP,53/UDP")
            ]
        );
    }
}
