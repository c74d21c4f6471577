{{/* The chart's name, at most 63 characters (a DNS label). */}}
{{- define "rscoord.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's objects' name. */}}
{{- define "rscoord.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains (include "rscoord.name" .) .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name (include "rscoord.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "rscoord.selectorLabels" -}}
app.kubernetes.io/name: {{ include "rscoord.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "rscoord.labels" -}}
{{ include "rscoord.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{/* The Secret with admin-password, token-secret and users.json. */}}
{{- define "rscoord.authSecret" -}}
{{- default (include "rscoord.fullname" .) .Values.auth.existingSecret }}
{{- end }}

{{/* How many replicas run, after checking the shape is one rscoord supports. */}}
{{- define "rscoord.replicas" -}}
{{- if .Values.cluster.enabled }}
{{- if lt (int .Values.cluster.replicas) 2 }}
{{- fail "cluster.enabled needs cluster.replicas of at least 2" }}
{{- end }}
{{- if not .Values.cluster.etcd.endpoints }}
{{- fail "cluster.enabled needs cluster.etcd.endpoints (every etcd member's client URL)" }}
{{- end }}
{{- .Values.cluster.replicas }}
{{- else }}
{{- 1 }}
{{- end }}
{{- end }}

{{/* Whether a users file is mounted and passed with --users. */}}
{{- define "rscoord.hasUsers" -}}
{{- if or .Values.auth.users (and .Values.auth.existingSecret .Values.auth.existingSecretHasUsers) }}true{{ end }}
{{- end }}
