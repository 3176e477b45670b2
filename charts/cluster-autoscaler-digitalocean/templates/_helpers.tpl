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
{{- range $v := list "autoscalingGroups" "autoscalingGroupsnamePrefix" "autoDiscovery" }}
{{- if index $.Values $v }}
{{- fail (printf "%s: DOKS node pools are found through the DigitalOcean API; choose them with nodePoolSelection (tags or auto_scale)" $v) }}
{{- end }}
{{- end }}
{{- if and .Values.cloudConfigPath (ne (toString .Values.cloudConfigPath) "/etc/do/cloud.json") }}
{{- fail "cloudConfigPath: the chart writes the cloud config itself from cloudConfig.*" }}
{{- end }}
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
  "token_file": {{ printf "%s/%s" (include "cad.tokenDir" .) .Values.cloudConfig.tokenSecretKey | toJson }}
}
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
