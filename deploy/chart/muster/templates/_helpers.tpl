{{/* Object names: the release name (so `helm install muster` gives `muster`). */}}
{{- define "muster.fullname" -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels on every object; also the selector (kept stable across upgrades). */}}
{{- define "muster.labels" -}}
app.kubernetes.io/name: muster
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "muster.monitoring" -}}
{{- if and .root.Values.monitoring.enabled (index .root.Values.monitoring .what).enabled -}}true{{- end -}}
{{- end -}}
