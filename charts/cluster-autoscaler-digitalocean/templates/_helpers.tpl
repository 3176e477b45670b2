{{/* Helpers; charts/ tests render the chart with helm itself. */}}

{{/* Full name of the release's objects (max 63 chars). */}}
{{- define "cad.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains "cluster-autoscaler" .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-cluster-autoscaler" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "cad.selectorLabels" -}}
app.kubernetes.io/name: cluster-autoscaler
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "cad.labels" -}}
{{ include "cad.selectorLabels" . }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "cad.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- .Values.serviceAccount.name | default (include "cad.fullname" .) -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
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

{{/* cloud.json (--cloud-config); its checksum rolls the pods when it changes. */}}
{{- define "cad.cloudConfig" -}}
{
  "cluster_id": {{ required "cloudConfig.clusterID is required: the DOKS cluster UUID (doctl kubernetes cluster list)" .Values.cloudConfig.clusterID | toJson }},
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
