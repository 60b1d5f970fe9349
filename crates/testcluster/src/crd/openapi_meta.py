#!/usr/bin/env python3
# Generates openapi_meta.json (next to this file): run as
#   python3 openapi_meta.py openapi_meta.json
# with k8s-openapi 0.29 in the cargo registry.
#
# Extracts the meta.k8s.io/v1 and autoscaling/v1 Scale schemas from
# k8s-openapi 0.29's v1_33 schemars impls (kube-openapi data) and writes them
# as OpenAPI v3 components with #/components/schemas refs.
import json, re, sys, glob, os
root = glob.glob(os.path.expanduser('~/.cargo/registry/src/*/k8s-openapi-0.29.0/src/v1_33'))[0]
files = {
  'apimachinery/pkg/apis/meta/v1/object_meta.rs', 'apimachinery/pkg/apis/meta/v1/managed_fields_entry.rs',
  'apimachinery/pkg/apis/meta/v1/owner_reference.rs', 'apimachinery/pkg/apis/meta/v1/time.rs',
  'apimachinery/pkg/apis/meta/v1/fields_v1.rs', 'apimachinery/pkg/apis/meta/v1/list_meta.rs',
  'apimachinery/pkg/apis/meta/v1/status.rs', 'apimachinery/pkg/apis/meta/v1/status_details.rs',
  'apimachinery/pkg/apis/meta/v1/status_cause.rs', 'apimachinery/pkg/apis/meta/v1/delete_options.rs',
  'apimachinery/pkg/apis/meta/v1/preconditions.rs', 'apimachinery/pkg/apis/meta/v1/patch.rs',
  'api/autoscaling/v1/scale.rs', 'api/autoscaling/v1/scale_spec.rs', 'api/autoscaling/v1/scale_status.rs',
}
def name_of(path):
    return 'io.k8s.' + path.replace('crate::', '').replace('::', '.')
out = {}
for f in sorted(files):
    src = open(os.path.join(root, f)).read()
    name = re.search(r'fn schema_name\(\)[^{]*\{\s*"([^"]+)"', src).group(1)
    body = src[src.index('json_schema!(') + len('json_schema!('):]
    body = body[:body.index('\n        })\n') + len('\n        }')]
    body = re.sub(r'\(\{\s*let mut schema_obj = __gen\.subschema_for::<([\w:]+)>\(\);\s*schema_obj\.ensure_object\(\)\.insert\("description"\.into\(\), ("(?:[^"\\]|\\.)*")\.into\(\)\);\s*schema_obj\s*\}\)',
                  lambda m: '{"$ref": "#/components/schemas/%s", "description": %s}' % (name_of(m.group(1)), m.group(2)), body)
    body = re.sub(r'\(__gen\.subschema_for::<([\w:]+)>\(\)\)', lambda m: '{"$ref": "#/components/schemas/%s"}' % name_of(m.group(1)), body)
    body = re.sub(r',(\s*[}\]])', r'\1', body)
    if '__gen' in body or 'schema_obj' in body:
        sys.exit('unconverted construct in ' + f)
    out[name] = json.loads(body)
# Group-version-kinds kube-apiserver's namer puts on these definitions.
out['io.k8s.apimachinery.pkg.apis.meta.v1.Status']['x-kubernetes-group-version-kind'] = [{'group': '', 'kind': 'Status', 'version': 'v1'}]
out['io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions']['x-kubernetes-group-version-kind'] = [{'group': '', 'kind': 'DeleteOptions', 'version': 'v1'}]
out['io.k8s.api.autoscaling.v1.Scale']['x-kubernetes-group-version-kind'] = [{'group': 'autoscaling', 'kind': 'Scale', 'version': 'v1'}]
pass
pass

# Query parameters kube-apiserver derives from the options structs
# (endpoints.AddObjectParams), in struct field order, with their SwaggerDoc.
doc = {
  'labelSelector': 'A selector to restrict the list of returned objects by their labels. Defaults to everything.',
  'fieldSelector': 'A selector to restrict the list of returned objects by their fields. Defaults to everything.',
  'watch': 'Watch for changes to the described resources and return them as a stream of add, update, and remove notifications. Specify resourceVersion.',
  'allowWatchBookmarks': 'allowWatchBookmarks requests watch events with type "BOOKMARK". Servers that do not implement bookmarks may ignore this flag and bookmarks are sent at the server\'s discretion. Clients should not assume bookmarks are returned at any specific interval, nor may they assume the server will send any BOOKMARK event during a session. If this is not a watch, this field is ignored.',
  'resourceVersion': 'resourceVersion sets a constraint on what resource versions a request may be served from. See https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions for details.\n\nDefaults to unset',
  'resourceVersionMatch': 'resourceVersionMatch determines how resourceVersion is applied to list calls. It is highly recommended that resourceVersionMatch be set for list calls where resourceVersion is set See https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions for details.\n\nDefaults to unset',
  'timeoutSeconds': 'Timeout for the list/watch call. This limits the duration of the call, regardless of any activity or inactivity.',
  'limit': 'limit is a maximum number of responses to return for a list call. If more items exist, the server will set the `continue` field on the list metadata to a value that can be used with the same initial query to retrieve the next set of results. Setting a limit may return fewer than the requested amount of items (up to zero items) in the event all requested objects are filtered out and clients should only use the presence of the continue field to determine whether more results are available. Servers may choose not to support the limit argument and will return all of the available results. If limit is specified and the continue field is empty, clients may assume that no more results are available. This field is not supported if watch is true.\n\nThe server guarantees that the objects returned when using continue will be identical to issuing a single list call without a limit - that is, no objects created, modified, or deleted after the first request is issued will be included in any subsequent continued requests. This is sometimes referred to as a consistent snapshot, and ensures that a client that is using limit to receive smaller chunks of a very large result can ensure they see all possible objects. If objects are updated during a chunked list the version of the object that was present at the time the first list result was calculated is returned.',
  'continue': 'The continue option should be set when retrieving more results from the server. Since this value is server defined, clients may only use the continue value from a previous query result with identical query parameters (except for the value of continue) and the server may reject a continue value it does not recognize. If the specified continue value is no longer valid whether due to expiration (generally five to fifteen minutes) or a configuration change on the server, the server will respond with a 410 ResourceExpired error together with a continue token. If the client needs a consistent list, it must restart their list without the continue field. Otherwise, the client may send another list request with the token received with the 410 error, the server will respond with a list starting from the next key, but from the latest snapshot, which is inconsistent from the previous list results - objects that are created, modified, or deleted after the first list request will be included in the response, as long as their keys are after the "next key".\n\nThis field is not supported when watch is true. Clients may start a watch from the last resourceVersion value returned by the server and not miss any modifications.',
  'sendInitialEvents': '`sendInitialEvents=true` may be set together with `watch=true`. In that case, the watch stream will begin with synthetic events to produce the current state of objects in the collection. Once all such events have been sent, a synthetic "Bookmark" event  will be sent. The bookmark will report the ResourceVersion (RV) corresponding to the set of objects, and be marked with `"k8s.io/initial-events-end": "true"` annotation. Afterwards, the watch stream will proceed as usual, sending watch events corresponding to changes (subsequent to the RV) to objects watched.\n\nWhen `sendInitialEvents` option is set, we require `resourceVersionMatch` option to also be set. The semantic of the watch request is as following: - `resourceVersionMatch` = NotOlderThan\n  is interpreted as "data at least as new as the provided `resourceVersion`"\n  and the bookmark event is send when the state is synced\n  to a `resourceVersion` at least as fresh as the one provided by the ListOptions.\n  If `resourceVersion` is unset, this is interpreted as "consistent read" and the\n  bookmark event is send when the state is synced at least to the moment\n  when request started being processed.\n- `resourceVersionMatch` set to any other value or unset\n  Invalid error is returned.\n\nDefaults to true if `resourceVersion=""` or `resourceVersion="0"` (for backward compatibility reasons) and to false otherwise.',
  'fieldManager': 'fieldManager is a name associated with the actor or entity that is making these changes. The value must be less than or 128 characters long, and only contain printable characters, as defined by https://golang.org/pkg/unicode/#IsPrint.',
  'fieldValidation': 'fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: - Ignore: This will ignore any unknown fields that are silently dropped from the object, and will ignore all but the last duplicate field that the decoder encounters. This is the default behavior prior to v1.23. - Warn: This will send a warning via the standard warning response header for each unknown field that is dropped from the object, and for each duplicate field that is encountered. The request will still succeed if there are no other errors, and will only persist the last of any duplicate fields. This is the default in v1.23+ - Strict: This will fail the request with a BadRequest error if any unknown fields would be dropped from the object, or if any duplicate fields are present. The error returned from the server will contain all unknown and duplicate fields encountered.',
  'force': 'Force is going to "force" Apply requests. It means user will re-acquire conflicting fields owned by other people. Force flag must be unset for non-apply patch requests.',
}
delete = out['io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions']['properties']
for k in ['gracePeriodSeconds', 'orphanDependents', 'propagationPolicy', 'dryRun', 'ignoreStoreReadErrorWithClusterBreakingPotential']:
    doc[k] = delete[k]['description']
types = {'watch': 'boolean', 'allowWatchBookmarks': 'boolean', 'timeoutSeconds': 'integer', 'limit': 'integer',
         'sendInitialEvents': 'boolean', 'force': 'boolean', 'gracePeriodSeconds': 'integer', 'orphanDependents': 'boolean',
         'ignoreStoreReadErrorWithClusterBreakingPotential': 'boolean'}
def params(names, overrides={}):
    return [{'name': n, 'type': types.get(n, 'string'), 'description': overrides.get(n, doc[n])} for n in names]
options = {
  'GetOptions': params(['resourceVersion']),
  'ListOptions': params(['labelSelector', 'fieldSelector', 'watch', 'allowWatchBookmarks', 'resourceVersion', 'resourceVersionMatch', 'timeoutSeconds', 'limit', 'continue', 'sendInitialEvents']),
  'CreateOptions': params(['dryRun', 'fieldManager', 'fieldValidation']),
  'UpdateOptions': params(['dryRun', 'fieldManager', 'fieldValidation']),
  'PatchOptions': params(['dryRun', 'force', 'fieldManager', 'fieldValidation'], {'fieldManager': doc['fieldManager'] + ' This field is required for apply requests (application/apply-patch) but optional for non-apply patch types (JsonPatch, MergePatch, StrategicMergePatch).'}),
  'DeleteOptions': params(['gracePeriodSeconds', 'orphanDependents', 'propagationPolicy', 'dryRun', 'ignoreStoreReadErrorWithClusterBreakingPotential']),
}
json.dump({'schemas': out, 'queryParameters': options}, open(sys.argv[1], 'w'), indent=2, sort_keys=True, ensure_ascii=False)
open(sys.argv[1], 'a').write('\n')
print(os.path.getsize(sys.argv[1]))
