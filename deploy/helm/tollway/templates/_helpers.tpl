{{/*
Names. Components are the values keys gateway, sessionApi and sessionWorker; their objects are
named <fullname>-gateway, <fullname>-session-api and <fullname>-session-worker.
*/}}
{{- define "tollway.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "tollway.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "tollway.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "tollway.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The components, in order. */}}
{{- define "tollway.components" -}}
gateway sessionApi sessionWorker
{{- end -}}

{{/* The name suffix of a component: (dict "component" "sessionApi") -> session-api. */}}
{{- define "tollway.suffix" -}}
{{- get (dict "gateway" "gateway" "sessionApi" "session-api" "sessionWorker" "session-worker") .component -}}
{{- end -}}

{{/* A component's object name: (dict "root" $ "component" "sessionApi"). */}}
{{- define "tollway.componentName" -}}
{{- printf "%s-%s" (include "tollway.fullname" .root | trunc 47 | trimSuffix "-") (include "tollway.suffix" .) -}}
{{- end -}}

{{- define "tollway.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tollway.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ include "tollway.suffix" . }}
{{- end -}}

{{- define "tollway.labels" -}}
{{ include "tollway.selectorLabels" . }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: tollway
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Labels of release-wide objects (the Secret). */}}
{{- define "tollway.releaseLabels" -}}
app.kubernetes.io/name: {{ include "tollway.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: tollway
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The Secret every process reads its credentials from. */}}
{{- define "tollway.secretName" -}}
{{- .Values.secrets.existingSecret | default (printf "%s-secrets" (include "tollway.fullname" .)) -}}
{{- end -}}

{{/* The gateway's address for the workers: gatewayBaseUrl, else this release's gateway Service. */}}
{{- define "tollway.gatewayBaseUrl" -}}
{{- if .Values.sessionWorker.gatewayBaseUrl -}}
{{- .Values.sessionWorker.gatewayBaseUrl -}}
{{- else if .Values.gateway.enabled -}}
{{- printf "http://%s.%s.svc:%v/v1" (include "tollway.componentName" (dict "root" . "component" "gateway")) .Release.Namespace .Values.gateway.port -}}
{{- else -}}
{{- fail "sessionWorker.gatewayBaseUrl is required when this release has no gateway (gateway.enabled=false): the gateway's /v1 address" -}}
{{- end -}}
{{- end -}}

{{/* Where Redis TLS files are mounted. */}}
{{- define "tollway.redisTlsDir" -}}/etc/tollway/redis-tls{{- end -}}

{{/*
The Redis settings every process shares, as ConfigMap data (no secret among them).
*/}}
{{- define "tollway.redisConfig" -}}
{{- $redis := .Values.redis -}}
REDIS_PREFIX: {{ $redis.prefix | quote }}
{{- if $redis.sentinel.addresses }}
REDIS_SENTINELS: {{ join "," $redis.sentinel.addresses | quote }}
REDIS_SENTINEL_NAME: {{ required "redis.sentinel.name is required with redis.sentinel.addresses" $redis.sentinel.name | quote }}
{{- with $redis.sentinel.username }}
REDIS_SENTINEL_USERNAME: {{ . | quote }}
{{- end }}
REDIS_SENTINEL_TLS: {{ $redis.sentinel.tls | toString | quote }}
{{- end }}
{{- if $redis.tls.secretName }}
REDIS_TLS_CA_FILE: {{ printf "%s/%s" (include "tollway.redisTlsDir" .) $redis.tls.caKey | quote }}
{{- if $redis.tls.certKey }}
REDIS_TLS_CERT_FILE: {{ printf "%s/%s" (include "tollway.redisTlsDir" .) $redis.tls.certKey | quote }}
REDIS_TLS_KEY_FILE: {{ printf "%s/%s" (include "tollway.redisTlsDir" .) (required "redis.tls.keyKey is required with redis.tls.certKey" $redis.tls.keyKey) | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/*
One env entry read from the Secret: (dict "root" $ "name" "GATEWAY_API_KEY" "key" "SERVICE_API_KEY"
"required" "what needs it"). A key the chart's own Secret lacks is left out, or fails the render when
required; a key of an existingSecret is referenced, optional unless required.
*/}}
{{- define "tollway.secretEnv" -}}
{{- $secrets := .root.Values.secrets -}}
{{- $value := get $secrets .key -}}
{{- if or $secrets.existingSecret $value }}
- name: {{ .name }}
  valueFrom:
    secretKeyRef:
      name: {{ include "tollway.secretName" .root }}
      key: {{ .key }}
      {{- if and $secrets.existingSecret (not .required) }}
      optional: true
      {{- end }}
{{- else if .required }}
{{- fail (printf "secrets.%s is required: %s (or name a Secret holding it in secrets.existingSecret)" .key .required) }}
{{- end }}
{{- end -}}

{{/* REDIS_URL and the Sentinels' password, for every process. */}}
{{- define "tollway.redisSecretEnv" -}}
{{- $required := ternary "" "the Redis every process connects to (or set redis.sentinel.addresses)" (not (empty .Values.redis.sentinel.addresses)) -}}
{{- include "tollway.secretEnv" (dict "root" . "name" "REDIS_URL" "key" "REDIS_URL" "required" $required) }}
{{- include "tollway.secretEnv" (dict "root" . "name" "REDIS_SENTINEL_PASSWORD" "key" "REDIS_SENTINEL_PASSWORD") }}
{{- end -}}

{{/* Extra env of a component: values that must not be secret, checked by name. */}}
{{- define "tollway.extraEnv" -}}
{{- range $name, $value := .env }}
{{- if regexMatch "(?i)(TOKEN|SECRET|PASSWORD|API_KEY)" $name }}
{{- fail (printf "%s.env.%s looks like a credential: env goes into a ConfigMap; put it in the Secret instead" $.component $name) }}
{{- end }}
{{ $name }}: {{ $value | toString | quote }}
{{- end }}
{{- end -}}
