#!/usr/bin/env python3
"""Generates descriptors.rs: the Kubernetes protobuf message layouts
(field tags and wire kinds, from the k8s-pb crate's prost structs) with
their JSON field names (from k8s-openapi's serde code).

Run from the workspace root after `cargo fetch`:
    python3 crates/testcluster/src/protobuf/generate_descriptors.py
It reads the crates from ~/.cargo/registry and rewrites
crates/testcluster/src/protobuf/descriptors.rs.
"""
import glob, os, re, sys

REG = glob.glob(os.path.expanduser("~/.cargo/registry/src/*/"))[0]
PB = sorted(glob.glob(REG + "k8s-pb-0.*"))[-1] + "/src/"
OA_ROOT = sorted(glob.glob(REG + "k8s-openapi-0.*"))[-1] + "/src/"
OA = sorted(glob.glob(OA_ROOT + "v1_*"))[-1] + "/"
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "descriptors.rs")

# Top-level groups whose kinds the decoder serves (module dirs under api/).
API_GROUPS = ["core", "apps", "batch", "rbac", "coordination", "events", "scheduling",
              "policy", "networking", "autoscaling", "discovery", "authorization",
              "authentication", "storage", "certificates", "admissionregistration", "node"]

# JSON names neither k8s-openapi nor the camel-case rule give.
OVERRIDES = {
    ("apiextensions_apiserver.pkg.apis.apiextensions.v1.JsonSchemaProps", "ref"): "$ref",
    ("apiextensions_apiserver.pkg.apis.apiextensions.v1.ConversionRequest", "desired_api_version"): "desiredAPIVersion",
}

def snake_to_camel(s):
    parts = s.split("_")
    return parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:])

def norm(name):
    name = name[2:] if name.startswith("r#") else name
    return name.rstrip("_")

messages = {}  # full name -> list of (tag, rust_name, kind, repeated, target)

attr_re = re.compile(r'#\[prost\(([^)]*)\)\]')
for path in glob.glob(PB + "**/mod.rs", recursive=True):
    mod = os.path.relpath(os.path.dirname(path), PB).split(os.sep)
    text = open(path).read()
    lines = text.split("\n")
    i = 0
    current = None
    while i < len(lines):
        line = lines[i]
        m = re.match(r'pub struct (\w+) \{', line)
        if m and "::prost::Message" in lines[i - 1]:
            current = ".".join(mod + [m.group(1)])
            messages[current] = []
        elif line.startswith("}"):
            current = None
        elif current:
            a = attr_re.search(line)
            if a and line.strip().startswith("#[prost("):
                attr = a.group(1)
                # the field declaration may span lines
                j = i + 1
                decl = lines[j].strip()
                while not decl.endswith(",") or decl.count("<") != decl.count(">"):
                    j += 1
                    decl += lines[j].strip()
                fm = re.match(r'pub ([\w#]+):\s*(.*),$', decl)
                name, ty = fm.group(1), fm.group(2)
                tag = int(re.search(r'tag = "(\d+)"', attr).group(1))
                kind = attr.split(",")[0].strip()
                repeated = "repeated" in attr
                target = None
                if kind.startswith("btree_map"):
                    kv = re.search(r'btree_map = "([^"]*)"', attr).group(1)
                    vk = kv.split(",")[1].strip()
                    kind = "map_" + vk
                    if vk == "message":
                        inner = ty[ty.index("<") + 1: ty.rindex(">")]
                        target = inner.split(",", 1)[1].strip()
                elif kind == "message":
                    target = ty
                if target is not None:
                    target = target.replace(",>", ">").strip().rstrip(",")
                    for w in ["::core::option::Option<", "::prost::alloc::vec::Vec<", "::prost::alloc::boxed::Box<"]:
                        while target.startswith(w):
                            target = target[len(w):-1]
                    target = target.strip().rstrip(",")
                    parts = target.split("::")
                    base = list(mod)
                    while parts and parts[0] == "super":
                        parts.pop(0)
                        base.pop()
                    if len(parts) == 1:
                        target = ".".join(base + parts)
                    else:
                        target = ".".join(base + parts)
                if kind.startswith("bytes"):
                    kind = "bytes"
                messages[current].append((tag, norm(name), kind, repeated, target))
                i = j
        i += 1

# JSON names from k8s-openapi: "jsonName" => Field::Key_rust_name
json_names = {}
global_names = {}
# Go structs embedded with `json:",inline"`: their fields belong to the parent.
INLINE = {"api.core.v1.VolumeSource", "api.core.v1.EphemeralContainerCommon",
          "api.core.v1.ProbeHandler", "api.core.v1.PersistentVolumeSource"}
for path in glob.glob(OA + "**/*.rs", recursive=True):
    rel = os.path.relpath(path, OA)[:-3].split(os.sep)
    text = open(path).read()
    sm = re.search(r'pub struct (\w+) \{', text)
    if not sm:
        continue
    mod = rel[:-1]
    names = dict((norm(r), j) for j, r in re.findall(r'"([^"]+)" => Field::Key_(\w+),', text))
    names.update({j.lower(): j for j in names.values()})
    json_names[".".join(mod + [sm.group(1)]).lower()] = names
    for r, j in names.items():
        global_names.setdefault(r, j)

# Reachability from the top-level kinds of the chosen groups.
roots = [n for n in messages if n.startswith("api.") and n.split(".")[1] in API_GROUPS
         and n.split(".")[2] in ("v1", "v2")]
roots += [n for n in messages if n.startswith("apiextensions_apiserver.pkg.apis.apiextensions.v1.")]
roots += [n for n in messages if n.startswith("apimachinery.pkg.apis.meta.v1.")]
seen, order = set(), []
stack = list(roots)
while stack:
    n = stack.pop()
    if n in seen or n not in messages:
        continue
    seen.add(n)
    order.append(n)
    for f in messages[n]:
        if f[4]:
            stack.append(f[4])
order.sort()
index = {n: i for i, n in enumerate(order)}

KIND = {"string": "Kind::String", "bool": "Kind::Bool", "int32": "Kind::Int32", "int64": "Kind::Int64",
        "bytes": "Kind::Bytes", "double": "Kind::Double", "float": "Kind::Float",
        "map_string": "Kind::MapString", "map_bytes": "Kind::MapBytes"}

out = ["// @generated by generate_descriptors.py from the k8s-pb and k8s-openapi crates; do not edit.",
       "//! Kubernetes protobuf message layouts: field tags, wire kinds and JSON names.",
       "",
       "use super::decode::{Field, Kind, Message};",
       "",
       "/// Every message the decoder knows, sorted by full name.",
       "pub(super) static MESSAGES: &[Message] = &["]
missing = 0
for n in order:
    # full proto-ish name: the module path and struct name
    oa_key = n
    if n.startswith("apiextensions_apiserver."):
        oa_key = n.replace("apiextensions_apiserver.pkg.apis.apiextensions", "apiextensions_apiserver.pkg.apis.apiextensions")
    jn = json_names.get(oa_key.lower())
    known_parent = jn is not None
    jn = jn or {}
    fields = []
    for tag, rust, kind, repeated, target in sorted(messages[n]):
        js = OVERRIDES.get((n, rust)) or jn.get(rust) or jn.get(rust.replace("_", "").lower())
        if js is None and known_parent and kind == "message":
            # A Go struct embedded with `json:",inline"`.
            INLINE.add(target)
            js = ""
        js = js if js is not None else global_names.get(rust)
        if js is None:
            js = snake_to_camel(rust)
            missing += 1
            if os.environ.get("SHOW_GUESSES"):
                print("guessed", n, rust, js, file=sys.stderr)
        if kind == "message" and js == "":
            k = "Kind::Inline(%d)" % index[target]
        elif kind == "message":
            k = "Kind::Message(%d)" % index[target]
        elif kind == "map_message":
            k = "Kind::MapMessage(%d)" % index[target]
        else:
            k = KIND[kind]
        fields.append('Field { tag: %d, json: "%s", kind: %s, repeated: %s }' % (tag, js, k, "true" if repeated else "false"))
    out.append('    Message {\n        name: "%s",\n        fields: &[\n%s\n        ],\n    },' % (n, "\n".join("            %s," % f for f in fields)))
out.append("];")
open(OUT, "w").write("\n".join(out) + "\n")
print("messages:", len(order), "json names guessed:", missing, file=sys.stderr)
