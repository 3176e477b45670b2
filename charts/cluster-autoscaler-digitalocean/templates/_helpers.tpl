{{/* Helpers; charts/ tests render the chart with helm itself. */}}

{{/* The app name: "cluster-autoscaler", or nameOverride. */}}
{{- define "cad.name" -}}
{{- .Values.nameOverride | default "cluster-autoscaler" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Full name of the release's objects (max 63 chars). */}}
{{- define "cad.fullname" -}}
{{- $name := include "cad.name" . -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "cad.selectorLabels" -}}
app.kubernetes.io/name: {{ include "cad.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "cad.labels" -}}
{{ include "cad.selectorLabels" . }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- with .Values.additionalLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* As upstream: the ServiceAccount named, else the full name when the chart creates it. */}}
{{- define "cad.serviceAccountName" -}}
{{- if and .Values.rbac.create .Values.rbac.serviceAccount.create -}}
{{- .Values.rbac.serviceAccount.name | default (include "cad.fullname" .) -}}
{{- else -}}
{{- required "rbac.serviceAccount.name is required when the chart does not create the ServiceAccount (rbac.create or rbac.serviceAccount.create false): the autoscaler must not run as the namespace's default ServiceAccount" .Values.rbac.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
Values of this chart's 0.1 that upstream's chart names differently, and
upstream values this chart cannot honour: refused by name rather than
silently ignored.
*/}}
{{- define "cad.checkValues" -}}
{{- $renamed := dict "replicas" "replicaCount" "imagePullSecrets" "image.pullSecrets (a list of Secret names)" "serviceAccount" "rbac.serviceAccount" "scanInterval" "extraArgs.scan-interval" "expander" "extraArgs.expander" "scaleDownUnneededTime" "extraArgs.scale-down-unneeded-time" "scaleDownUtilizationThreshold" "extraArgs.scale-down-utilization-threshold" "maxNodeProvisionTime" "extraArgs.max-node-provision-time" "balanceSimilarNodeGroups" "extraArgs.balance-similar-node-groups" "v" "extraArgs.v" -}}
{{- range $old, $new := $renamed }}
{{- if hasKey $.Values $old }}
{{- fail (printf "value %s is now %s (upstream's chart's name)" $old $new) }}
{{- end }}
{{- end }}
{{- if hasKey .Values.service "enabled" }}
{{- fail "value service.enabled is now service.create (upstream's chart's name)" }}
{{- end }}
{{- if and .Values.cloudProvider (ne (toString .Values.cloudProvider) "digitalocean") }}
{{- fail (printf "cloudProvider %q: this chart runs only the digitalocean provider" (toString .Values.cloudProvider)) }}
{{- end }}
{{- range $v := list "autoscalingGroups" "autoscalingGroupsnamePrefix" }}
{{- if index $.Values $v }}
{{- fail (printf "%s: DOKS node pools are found through the DigitalOcean API; choose them with nodePoolSelection (tags or auto_scale)" $v) }}
{{- end }}
{{- end }}
{{- /* autoDiscovery as upstream's values.yaml has it (no cluster name, its
default tags and roles) discovers nothing there either: accepted. */ -}}
{{- with .Values.autoDiscovery }}
{{- $upstream := dict "tags" (list "k8s.io/cluster-autoscaler/enabled" "k8s.io/cluster-autoscaler/{{ .Values.autoDiscovery.clusterName }}") "roles" (list "worker") -}}
{{- $set := list }}
{{- range $k, $v := . }}
{{- if and $v (ne (toJson $v) (toJson (get $upstream $k))) }}{{ $set = append $set $k }}{{ end }}
{{- end }}
{{- if $set }}
{{- fail (printf "autoDiscovery (%s): DOKS node pools are found through the DigitalOcean API; choose them with nodePoolSelection (tags or auto_scale)" (join ", " (sortAlpha $set))) }}
{{- end }}
{{- end }}
{{- if and .Values.cloudConfigPath (ne (toString .Values.cloudConfigPath) "/etc/do/cloud.json") }}
{{- fail "cloudConfigPath: the chart writes the cloud config itself from cloudConfig.*" }}
{{- end }}
{{- include "cad.checkUnsupportedUpstreamValues" . }}
{{- range $key, $value := .Values.extraArgs }}
{{- $bare := regexReplaceAll "^-+" $key "" }}
{{- if or (eq (mustRegexFind "^[^_]+" $bare) "node-autoprovisioning-enabled") (eq (replace "_" "-" $bare) "node-autoprovisioning-enabled") }}
{{- if and (or (kindIs "invalid" $value) (eq (toString $value) "true")) (not $.Values.cloudConfig.autoprovisioning) }}
{{- fail (printf "extraArgs.%s: node autoprovisioning needs cloudConfig.autoprovisioning (at least sizes: the droplet sizes pools may be created with); the binary refuses the flag without it" $key) }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{/*
Upstream chart values this chart does not implement, refused by name when set
to anything but upstream's default (which changes nothing), so that a values
file written for upstream's chart never installs with part of it silently
dropped. values.schema.json refuses every other unknown key.
*/}}
{{- define "cad.checkUnsupportedUpstreamValues" -}}
{{- $why := dict
  "customArgs" "put each flag in extraArgs (name: value; name: null for a bare flag; name_1, name_2 to repeat one), where the chart checks it against the flags it sets itself"
  "extraObjects" "apply further objects with their own manifests or chart"
  "envFromConfigMap" "give variables one by one in extraEnv"
  "envFromSecret" "mount the Secret with extraVolumeSecrets; the API token goes in the Secret cloudConfig.tokenSecretName names"
  "extraEnvConfigMaps" "give variables one by one in extraEnv"
  "extraEnvSecrets" "mount the Secret with extraVolumeSecrets; the API token goes in the Secret cloudConfig.tokenSecretName names"
  "dnsConfig" "the pod keeps the cluster's DNS; it needs only api.digitalocean.com and the Kubernetes API"
  "initContainers" "the autoscaler needs none; the chart does not render them"
  "deployment" "the Deployment's annotations and selector are the chart's own"
  "vpa" "the autoscaler's requests are set with resources"
  "secretKeyRefNameOverride" "the token Secret is named by cloudConfig.tokenSecretName"
  "kubeTargetVersionOverride" "the chart renders the same objects on every Kubernetes version it supports"
-}}
{{- range $key, $reason := $why }}
{{- $v := index $.Values $key }}
{{- if eq $key "vpa" }}{{ $v = and $v $v.enabled }}{{ else if kindIs "map" $v }}{{ $v = compact (values $v) }}{{ end }}
{{- if $v }}
{{- fail (printf "%s is an upstream chart value this chart does not support: %s (docs/helm-chart.md lists every upstream value)" $key $reason) }}
{{- end }}
{{- end }}
{{- $defaults := dict "dnsPolicy" "ClusterFirst" "hostNetwork" "false" "revisionHistoryLimit" "10" -}}
{{- range $key, $default := $defaults }}
{{- if and (hasKey $.Values $key) (not (kindIs "invalid" (index $.Values $key))) (ne (toString (index $.Values $key)) $default) }}
{{- fail (printf "%s %v: an upstream chart value this chart does not support (only upstream's default %s is accepted; docs/helm-chart.md lists every upstream value)" $key (index $.Values $key) $default) }}
{{- end }}
{{- end }}
{{- /* Other providers' values: accepted empty, false or at upstream's
default (upstream's values.yaml sets these to non-empty defaults). */ -}}
{{- $providerDefaults := dict
  "azureVMType" "vmss"
  "civoApiUrl" "https://api.civo.com"
  "clusterAPICloudConfigPath" "/etc/kubernetes/mgmt-kubeconfig"
  "clusterAPIMode" "incluster-incluster"
  "clusterAPIWorkloadKubeconfigPath" "/etc/kubernetes/value"
  "magnumCABundlePath" "/etc/kubernetes/ca-bundle.crt"
  "kwokConfigMapName" "kwok-provider-config"
-}}
{{- range $key, $value := .Values }}
{{- if regexMatch "^(aws|azure|civo|magnum|clusterAPI|kwok)" $key }}
{{- if and $value (ne (toString $value) "false") (ne (toString $value) (get $providerDefaults $key)) }}
{{- fail (printf "%s is an upstream chart value for another cloud provider: this chart runs only the digitalocean provider (only upstream's default is accepted)" $key) }}
{{- end }}
{{- end }}
{{- end }}
{{- with .Values.rbac }}
{{- if .pspEnabled }}
{{- fail "rbac.pspEnabled: PodSecurityPolicy no longer exists in Kubernetes; this chart does not support it" }}
{{- end }}
{{- if and (hasKey . "clusterScoped") (not .clusterScoped) }}
{{- fail "rbac.clusterScoped false is an upstream chart value this chart does not support: the autoscaler reads nodes and pods cluster-wide" }}
{{- end }}
{{- if .additionalRules }}
{{- fail "rbac.additionalRules is an upstream chart value this chart does not support: the ClusterRole is the least privilege the binary needs (docs/helm-chart.md); grant more with a Role or ClusterRole of your own" }}
{{- end }}
{{- if .annotations }}
{{- fail "rbac.annotations is an upstream chart value this chart does not support" }}
{{- end }}
{{- end }}
{{- if .Values.service.selector }}
{{- fail "service.selector is an upstream chart value this chart does not support: the Service selects the chart's pods" }}
{{- end }}
{{- with .Values.podDisruptionBudget }}
{{- range $key := list "annotations" "selector" }}
{{- if index $.Values.podDisruptionBudget $key }}
{{- fail (printf "podDisruptionBudget.%s is an upstream chart value this chart does not support: podDisruptionBudget is rendered as the budget's spec (minAvailable or maxUnavailable)" $key) }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{/* "true" when extraArgs sets the flag (list $ "flag-name") in any spelling the binary reads. */}}
{{- define "cad.extraArgSet" -}}
{{- $flag := index . 1 -}}
{{- range $key, $_ := (index . 0).Values.extraArgs -}}
{{- $bare := regexReplaceAll "^-+" $key "" -}}
{{- if or (eq (mustRegexFind "^[^_]+" $bare) $flag) (eq (replace "_" "-" $bare) $flag) -}}true{{- end -}}
{{- end -}}
{{- end -}}

{{/* Names the Role grants by resourceNames; they follow the flags. */}}
{{- define "cad.statusConfigMapName" -}}
{{- index .Values.extraArgs "status-config-map-name" | default "cluster-autoscaler-status" -}}
{{- end -}}

{{- define "cad.leaseName" -}}
{{- index .Values.extraArgs "leader-elect-resource-name" | default "cluster-autoscaler" -}}
{{- end -}}

{{/* Where the token Secret is mounted; cloud.json's token_file points into it. */}}
{{- define "cad.tokenDir" -}}/var/run/secrets/digitalocean{{- end -}}

{{/* nodePoolSelection, checked: the binary would refuse any other value at start-up. */}}
{{- define "cad.nodePoolSelection" -}}
{{- if or (eq (printf "%v" .Values.nodePoolSelection) "tags") (eq (printf "%v" .Values.nodePoolSelection) "auto_scale") -}}
{{- .Values.nodePoolSelection -}}
{{- else -}}
{{- fail (printf "nodePoolSelection %q is not valid: want \"tags\" (pools with auto-scale off and the k8s-cluster-autoscaler-* tags) or \"auto_scale\"" (printf "%v" .Values.nodePoolSelection)) -}}
{{- end -}}
{{- end -}}

{{/* cloudConfig.clusterID, checked as the binary checks cluster_id: a UUID. */}}
{{- define "cad.clusterID" -}}
{{- $id := required "cloudConfig.clusterID is required: the DOKS cluster UUID (doctl kubernetes cluster list)" .Values.cloudConfig.clusterID | toString -}}
{{- if not (regexMatch "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$" $id) -}}
{{- fail (printf "cloudConfig.clusterID (%d characters) is not a UUID: want the cluster's ID as doctl kubernetes cluster list shows it, e.g. 123e4567-e89b-12d3-a456-426614174000" (len $id)) -}}
{{- end -}}
{{- $id -}}
{{- end -}}

{{/* cloud.json (--cloud-config); its checksum rolls the pods when it changes. */}}
{{- define "cad.cloudConfig" -}}
{
  "cluster_id": {{ include "cad.clusterID" . | toJson }},
  "node_pool_selection": {{ include "cad.nodePoolSelection" . | toJson }},
  {{- if .Values.cloudConfig.url }}
  "url": {{ .Values.cloudConfig.url | toJson }},
  {{- end }}
  {{- with include "cad.autoprovisioning" . }}
  "autoprovisioning": {{ . }},
  {{- end }}
  {{- with include "cad.priceOverrides" . }}
  "price_overrides": {{ . }},
  {{- end }}
  {{- with include "cad.provisionTimes" . }}
  "max_node_provision_time_by_size": {{ . }},
  {{- end }}
  "token_file": {{ printf "%s/%s" (include "cad.tokenDir" .) .Values.cloudConfig.tokenSecretKey | toJson }}
}
{{- end -}}

{{/*
cloudConfig.autoprovisioning as cloud.json's "autoprovisioning" section (JSON,
one line), checked field by field as the binary's parser checks it so that a
mistake fails helm install instead of the pod's start-up; the binary's
refusal stays the backstop. Empty when the section is not given.
*/}}
{{- define "cad.autoprovisioning" -}}
{{- $a := .Values.cloudConfig.autoprovisioning -}}
{{- if $a -}}
{{- $out := dict -}}
{{- $sizes := $a.sizes | default list -}}
{{- if or (not (kindIs "slice" $sizes)) (not $sizes) -}}
{{- fail "cloudConfig.autoprovisioning.sizes is empty: name the droplet sizes pools may be created with, e.g. [\"s-*\", \"gpu-h100x1-80gb\"]" -}}
{{- end -}}
{{- range $i, $s := $sizes -}}
{{- $s = toString $s -}}
{{- if or (not (regexMatch "^[a-z0-9*?-]+$" $s)) (gt (len $s) 64) -}}
{{- fail (printf "cloudConfig.autoprovisioning.sizes[%d] %q is not a size slug or pattern: want lower-case letters, digits, '-', and the wildcards '*' and '?'" $i $s) -}}
{{- end -}}
{{- end -}}
{{- if ne (len (uniq $sizes)) (len $sizes) -}}
{{- fail (printf "cloudConfig.autoprovisioning.sizes %v lists a size twice" $sizes) -}}
{{- end -}}
{{- $_ := set $out "sizes" $sizes -}}
{{- if hasKey $a "maxNodesPerPool" -}}
{{- $n := $a.maxNodesPerPool -}}
{{- if or (not (regexMatch "^[0-9]+$" (toString $n))) (lt (int $n) 1) (gt (int $n) 1000) -}}
{{- fail (printf "cloudConfig.autoprovisioning.maxNodesPerPool %v is not between 1 and 1000" $n) -}}
{{- end -}}
{{- $_ := set $out "max_nodes_per_pool" (int $n) -}}
{{- end -}}
{{- with $a.namePrefix -}}
{{- if or (not (regexMatch "^[a-z][a-z0-9-]*$" (toString .))) (gt (len (toString .)) 20) -}}
{{- fail (printf "cloudConfig.autoprovisioning.namePrefix %q is not valid: want a lower-case letter, then lower-case letters, digits or '-', at most 20 characters" (toString .)) -}}
{{- end -}}
{{- $_ := set $out "name_prefix" (toString .) -}}
{{- end -}}
{{- with $a.taintKeys -}}
{{- range $i, $k := . -}}
{{- $k = toString $k -}}
{{- $name := $k -}}
{{- $ns := "" -}}
{{- if contains "/" $k -}}
{{- $parts := splitn "/" 2 $k -}}
{{- $ns = $parts._0 -}}
{{- $name = $parts._1 -}}
{{- if or (gt (len $ns) 253) (not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$" $ns)) -}}
{{- fail (printf "cloudConfig.autoprovisioning.taintKeys[%d] %q is not a valid taint key: its prefix must be a DNS subdomain" $i $k) -}}
{{- end -}}
{{- end -}}
{{- if or (gt (len $name) 63) (not (regexMatch "^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$" $name)) -}}
{{- fail (printf "cloudConfig.autoprovisioning.taintKeys[%d] %q is not a valid taint key: want a name of letters, digits, '-', '_' and '.', at most 63 characters, optionally after a DNS subdomain and '/'" $i $k) -}}
{{- end -}}
{{- if has $k (list "ToBeDeletedByClusterAutoscaler" "DeletionCandidateOfClusterAutoscaler" "nvidia.com/gpu" "amd.com/gpu") -}}
{{- fail (printf "cloudConfig.autoprovisioning.taintKeys[%d] %q is a taint the autoscaler or DOKS sets itself" $i $k) -}}
{{- end -}}
{{- range $r := list "kubernetes.io" "k8s.io" "digitalocean.com" -}}
{{- if or (eq $ns $r) (hasSuffix (printf ".%s" $r) $ns) -}}
{{- fail (printf "cloudConfig.autoprovisioning.taintKeys[%d] %q is in the %s namespace, whose taints Kubernetes, the autoscaler or DOKS set" $i $k $r) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if ne (len (uniq .)) (len .) -}}
{{- fail (printf "cloudConfig.autoprovisioning.taintKeys %v lists a key twice" .) -}}
{{- end -}}
{{- $_ := set $out "taint_keys" . -}}
{{- end -}}
{{- if hasKey $a "maxHourlyCostPerPool" -}}
{{- $c := $a.maxHourlyCostPerPool -}}
{{- if or (not (regexMatch "^[0-9]+(\\.[0-9]+)?$" (toString $c))) (lt (float64 $c) 0.01) -}}
{{- fail (printf "cloudConfig.autoprovisioning.maxHourlyCostPerPool %v is not a limit: want USD an hour, at least 0.01" $c) -}}
{{- end -}}
{{- $_ := set $out "max_hourly_cost_per_pool" (float64 $c) -}}
{{- end -}}
{{- if hasKey $a "sizePreference" -}}
{{- $pref := $a.sizePreference | default list -}}
{{- if or (not (kindIs "slice" $pref)) (not $pref) -}}
{{- fail "cloudConfig.autoprovisioning.sizePreference is empty: leave it out, or list the sizes to use, first preferred" -}}
{{- end -}}
{{- range $i, $s := $pref -}}
{{- $s = toString $s -}}
{{- if not (regexMatch "^[a-z0-9]+(-[a-z0-9]+)*$" $s) -}}
{{- fail (printf "cloudConfig.autoprovisioning.sizePreference[%d] %q is not a size slug: want lower-case letters, digits and '-', no wildcards (each entry is one size)" $i $s) -}}
{{- end -}}
{{- end -}}
{{- if ne (len (uniq $pref)) (len $pref) -}}
{{- fail (printf "cloudConfig.autoprovisioning.sizePreference %v lists a size twice" $pref) -}}
{{- end -}}
{{- $_ := set $out "size_preference" $pref -}}
{{- end -}}
{{- $out | toJson -}}
{{- end -}}
{{- end -}}

{{/*
cloudConfig.priceOverrides as cloud.json's "price_overrides" (JSON, one
line), checked as the binary checks it; empty when none is given.
*/}}
{{- define "cad.priceOverrides" -}}
{{- with .Values.cloudConfig.priceOverrides -}}
{{- range $slug, $v := . -}}
{{- if or (not (regexMatch "^[a-z0-9][a-z0-9-]*$" $slug)) (gt (len $slug) 64) -}}
{{- fail (printf "cloudConfig.priceOverrides: %q is not a size slug: want lower-case letters, digits and '-'" $slug) -}}
{{- end -}}
{{- if or (not (regexMatch "^[0-9]+(\\.[0-9]+)?$" (toString $v))) (le (float64 $v) 0.0) (gt (float64 $v) 1000.0) -}}
{{- fail (printf "cloudConfig.priceOverrides[%q]: %v is not a price: want USD an hour, more than 0 and at most 1000" $slug $v) -}}
{{- end -}}
{{- end -}}
{{- . | toJson -}}
{{- end -}}
{{- end -}}

{{/*
cloudConfig.maxNodeProvisionTimeBySize as cloud.json's
"max_node_provision_time_by_size" (JSON, one line): size slug to a Go
duration of hours, minutes and seconds, more than 0, so that a typo fails
helm install; the binary's refusal (also of more than a day) stays the
backstop. Empty when none is given.
*/}}
{{- define "cad.provisionTimes" -}}
{{- with .Values.cloudConfig.maxNodeProvisionTimeBySize -}}
{{- range $slug, $v := . -}}
{{- if or (not (regexMatch "^[a-z0-9][a-z0-9-]*$" $slug)) (gt (len $slug) 64) -}}
{{- fail (printf "cloudConfig.maxNodeProvisionTimeBySize: %q is not a size slug: want lower-case letters, digits and '-'" $slug) -}}
{{- end -}}
{{- if not (and (kindIs "string" $v) (regexMatch "^([0-9]+h)?([0-9]+m)?([0-9]+s)?$" $v) (ne $v "") (regexMatch "[1-9]" $v)) -}}
{{- fail (printf "cloudConfig.maxNodeProvisionTimeBySize[%q]: %v is not a provision time: want a duration such as \"20m\" (hours, minutes, seconds), more than 0" $slug $v) -}}
{{- end -}}
{{- end -}}
{{- . | toJson -}}
{{- end -}}
{{- end -}}

{{/*
Flags the chart sets itself and extraArgs may not override: the provider and
its config, the namespace the RBAC, Lease and status ConfigMap are made for,
leader election (two replicas without it would both act) and the address the
probes and the Service use. A key is refused in either spelling ("-" or "_",
as the binary reads both) and with upstream's "_<suffix>" repeat form.
*/}}
{{- define "cad.reservedFlags" -}}
cloud-provider cloud-config namespace leader-elect address
{{- end -}}

{{/*
extraArgs as upstream's chart renders them: "name: value" is --name=value,
"name: null" a bare --name, and everything from the first "_" of a key on is
dropped, so "name_1", "name_2" repeat a flag.
*/}}
{{- define "cad.extraArgs" -}}
{{- $reserved := splitList " " (include "cad.reservedFlags" .) -}}
{{- range $key, $value := .Values.extraArgs }}
{{- $bare := regexReplaceAll "^-+" $key "" }}
{{- $flag := $bare | mustRegexFind "^[^_]+" }}
{{- if or (has $flag $reserved) (has (replace "_" "-" $bare) $reserved) }}
{{- fail (printf "extraArgs.%s: --%s is set by the chart and may not be overridden (it follows the release namespace, the cloud config Secret, the probes and the RBAC it creates)" $key (ternary $flag (replace "_" "-" $bare) (has $flag $reserved))) }}
{{- end }}
{{- if kindIs "invalid" $value }}
- {{ printf "--%s" $flag | quote }}
{{- else }}
- {{ printf "--%s=%v" $flag $value | quote }}
{{- end }}
{{- end }}
{{- end -}}
