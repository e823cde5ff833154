{{/*
Names, labels, the paths inside the pod, and the Gatehouse configuration built from the values.
*/}}

{{- define "gatehouse.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gatehouse.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "gatehouse.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gatehouse.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gatehouse.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "gatehouse.labels" -}}
helm.sh/chart: {{ include "gatehouse.chart" . }}
{{ include "gatehouse.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "gatehouse.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "gatehouse.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "gatehouse.secretName" -}}
{{- default (include "gatehouse.fullname" .) .Values.secret.existingSecret -}}
{{- end -}}

{{- define "gatehouse.image" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/* Where things are inside the pod. The configuration directory is the ConfigMap's mount. */}}
{{- define "gatehouse.configDir" -}}/etc/gatehouse{{- end -}}
{{- define "gatehouse.configFile" -}}/etc/gatehouse/gatehouse.yaml{{- end -}}
{{- define "gatehouse.secretDir" -}}/run/secrets/gatehouse{{- end -}}
{{- define "gatehouse.certDir" -}}/run/secrets/gatehouse-tls{{- end -}}
{{- define "gatehouse.stateDir" -}}/var/lib/gatehouse{{- end -}}

{{/* "true" when the configuration has a redis section. */}}
{{- define "gatehouse.redisEnabled" -}}
{{- if or .Values.redis.url .Values.redis.sentinel .Values.redis.cluster -}}true{{- end -}}
{{- end -}}

{{/* "true" when the pod needs the Secret: the admin token file, or the cluster secret for Redis. */}}
{{- define "gatehouse.secretNeeded" -}}
{{- if or .Values.admin.tokenFile (include "gatehouse.redisEnabled" .) -}}true{{- end -}}
{{- end -}}

{{/*
Seconds the kubelet waits between asking the pod to stop and killing it: the preStop sleep, then
shutdown_grace for open requests, then up to 5 s for the access log to reach stdout, and a margin.
*/}}
{{- define "gatehouse.terminationGracePeriodSeconds" -}}
{{- $floor := add (int .Values.lifecycle.preStopSleepSeconds) (int .Values.config.shutdownGraceSeconds) -}}
{{- if kindIs "invalid" .Values.terminationGracePeriodSeconds -}}
{{- add $floor 10 -}}
{{- else -}}
{{- int .Values.terminationGracePeriodSeconds -}}
{{- end -}}
{{- end -}}

{{/*
Values that cannot work together, refused before anything reaches the cluster (values.schema.json
refuses unknown keys and values of the wrong kind).
*/}}
{{- define "gatehouse.validate" -}}
{{- $v := .Values -}}
{{- $floor := add (int $v.lifecycle.preStopSleepSeconds) (int $v.config.shutdownGraceSeconds) -}}
{{- if le (int (include "gatehouse.terminationGracePeriodSeconds" .)) $floor -}}
{{- fail (printf "terminationGracePeriodSeconds (%v) must exceed lifecycle.preStopSleepSeconds + config.shutdownGraceSeconds (%d); leave it empty to have it computed" $v.terminationGracePeriodSeconds $floor) -}}
{{- end -}}
{{- if le (mul (int $v.probes.liveness.periodSeconds) (int $v.probes.liveness.failureThreshold)) (int $v.config.shutdownGraceSeconds) -}}
{{- fail "probes.liveness: periodSeconds x failureThreshold must exceed config.shutdownGraceSeconds, since /healthz stops answering when draining starts" -}}
{{- end -}}
{{- if not (or $v.listeners.http.enabled $v.listeners.https.enabled) -}}
{{- fail "listeners: enable http, https or both; Gatehouse needs at least one listener" -}}
{{- end -}}
{{- if and $v.proxyProtocol.enabled $v.listeners.https.enabled $v.listeners.https.http3 -}}
{{- fail "proxyProtocol.enabled: QUIC carries no PROXY protocol header, so Gatehouse refuses http3 on a proxy_protocol listener; set listeners.https.http3=false" -}}
{{- end -}}
{{- if and $v.proxyProtocol.enabled (not $v.proxyProtocol.trusted) -}}
{{- fail "proxyProtocol.trusted: list the balancers' networks (e.g. the VPC CIDR); connections from anywhere else are refused" -}}
{{- end -}}
{{- $redisSources := 0 -}}
{{- range (list $v.redis.url $v.redis.sentinel $v.redis.cluster) -}}
{{- if . -}}{{- $redisSources = add1 $redisSources -}}{{- end -}}
{{- end -}}
{{- if gt $redisSources 1 -}}
{{- fail "redis: set exactly one of url, sentinel and cluster" -}}
{{- end -}}
{{- if and $v.tls.redisStore (not (include "gatehouse.redisEnabled" .)) -}}
{{- fail "tls.redisStore: a certificate store in Redis needs redis.url (or sentinel, or cluster)" -}}
{{- end -}}
{{- if and $v.redis.password $v.secret.existingSecret -}}
{{- fail "redis.password: with secret.existingSecret, put the password in that Secret under secret.keys.redisPassword and set redis.passwordFromSecret=true" -}}
{{- end -}}
{{- if and $v.metrics.serviceMonitor.enabled (not $v.admin.service.enabled) -}}
{{- fail "metrics.serviceMonitor.enabled: the ServiceMonitor selects the admin Service; set admin.service.enabled=true" -}}
{{- end -}}
{{- if and $v.metrics.serviceMonitor.enabled (not (has "/metrics" $v.admin.public)) (not $v.metrics.serviceMonitor.authorization.secretName) -}}
{{- fail "metrics.serviceMonitor: /metrics needs a token; add /metrics to admin.public, or give metrics.serviceMonitor.authorization a Secret holding a read token whose SHA-256 is in admin.tokens" -}}
{{- end -}}
{{- if not (has "/healthz" $v.admin.public) -}}
{{- fail "admin.public: keep /healthz in it; the probes call it without a token" -}}
{{- end -}}
{{- end -}}

{{/* The pod's lowest listening port, for the unprivileged-port sysctl. */}}
{{- define "gatehouse.lowestPort" -}}
{{- $low := int .Values.admin.port -}}
{{- if .Values.listeners.http.enabled -}}{{- $low = min $low (int .Values.listeners.http.containerPort) -}}{{- end -}}
{{- if .Values.listeners.https.enabled -}}{{- $low = min $low (int .Values.listeners.https.containerPort) -}}{{- end -}}
{{- $low -}}
{{- end -}}

{{/* host:port for a bind address, IPv6 in brackets. */}}
{{- define "gatehouse.bind" -}}
{{- $host := index . 0 -}}
{{- if contains ":" $host -}}[{{ $host }}]:{{ index . 1 }}{{- else -}}{{ $host }}:{{ index . 1 }}{{- end -}}
{{- end -}}

{{/*
The configuration built from the values (before config.extra): YAML text, turned back into a map
by gatehouse.configMap.
*/}}
{{- define "gatehouse.generatedConfig" -}}
{{- $v := .Values -}}
{{- $c := $v.config -}}
{{- $fullname := include "gatehouse.fullname" . -}}
{{- $secretDir := include "gatehouse.secretDir" . -}}
{{- $stateDir := include "gatehouse.stateDir" . -}}
{{- $redis := include "gatehouse.redisEnabled" . -}}
{{- $cfg := dict "workers" $c.workers "shutdown_grace" (printf "%ds" (int $c.shutdownGraceSeconds)) "watch" (eq $c.reload "watch") -}}
{{- $_ := set $cfg "access_log" (dict "path" $c.accessLog.path "format" $c.accessLog.format) -}}
{{- $_ := set $cfg "control" (dict "dir" (printf "%s/control" $stateDir) "follow" $c.followReleases) -}}
{{- with $c.nodeLabels -}}
{{- $_ := set $cfg "node" (dict "labels" .) -}}
{{- end -}}
{{- /* admin */ -}}
{{- $admin := dict "bind" (include "gatehouse.bind" (list $c.bindAddress (int $v.admin.port))) "public" $v.admin.public -}}
{{- with $v.admin.hosts -}}{{- $_ := set $admin "hosts" . -}}{{- end -}}
{{- with $v.admin.tokens -}}{{- $_ := set $admin "tokens" . -}}{{- end -}}
{{- if $v.admin.tokenFile -}}
{{- $_ := set $admin "token_file" (dict "path" (printf "%s/%s" $secretDir $v.secret.keys.adminToken)) -}}
{{- end -}}
{{- $_ := set $cfg "admin" $admin -}}
{{- /* listeners */ -}}
{{- $listeners := dict -}}
{{- $pp := dict -}}
{{- if $v.proxyProtocol.enabled -}}{{- $pp = dict "proxy_protocol" (dict "trusted" $v.proxyProtocol.trusted) -}}{{- end -}}
{{- if $v.listeners.http.enabled -}}
{{- $l := dict "bind" (include "gatehouse.bind" (list $c.bindAddress (int $v.listeners.http.containerPort))) -}}
{{- $l = mustMergeOverwrite $l (deepCopy $pp) (deepCopy ($v.listeners.http.settings | default dict)) -}}
{{- $_ := set $listeners "http" $l -}}
{{- end -}}
{{- if $v.listeners.https.enabled -}}
{{- $l := dict "bind" (include "gatehouse.bind" (list $c.bindAddress (int $v.listeners.https.containerPort))) "tls" (dict) -}}
{{- if $v.listeners.https.http3 -}}
{{- $_ := set $l "http3" true -}}
{{- if $v.listeners.https.altSvc -}}
{{- $_ := set $l "alt_svc" $v.listeners.https.altSvc -}}
{{- else if ne (int $v.listeners.https.servicePort) (int $v.listeners.https.containerPort) -}}
{{- /* Alt-Svc must name the port clients reach (the Service's), not the container's. */ -}}
{{- $_ := set $l "alt_svc" (printf "h3=\":%d\"; ma=86400" (int $v.listeners.https.servicePort)) -}}
{{- end -}}
{{- end -}}
{{- $l = mustMergeOverwrite $l (deepCopy $pp) (deepCopy ($v.listeners.https.settings | default dict)) -}}
{{- $_ := set $listeners "https" $l -}}
{{- end -}}
{{- $_ := set $cfg "listeners" $listeners -}}
{{- /* tls */ -}}
{{- $tls := dict -}}
{{- if $v.tls.selfSigned.enabled -}}
{{- $names := $v.tls.selfSigned.names -}}
{{- if not $names -}}
{{- $ns := .Release.Namespace -}}
{{- $names = list $fullname (printf "%s.%s.svc" $fullname $ns) (printf "%s.%s.svc.%s" $fullname $ns $v.clusterDomain) -}}
{{- end -}}
{{- $_ := set $tls "self_signed" (dict "dir" (printf "%s/tls" $stateDir) "names" $names) -}}
{{- end -}}
{{- if $v.tls.certificateSecrets -}}
{{- $certs := list -}}
{{- range $v.tls.certificateSecrets -}}
{{- $dir := printf "%s/%s" (include "gatehouse.certDir" $) . -}}
{{- $certs = append $certs (dict "cert" (printf "%s/tls.crt" $dir) "key" (printf "%s/tls.key" $dir)) -}}
{{- end -}}
{{- $_ := set $tls "certificates" $certs -}}
{{- end -}}
{{- if $v.tls.storeSecret -}}
{{- $_ := set $tls "store" (dict "dir" (printf "%s/store" (include "gatehouse.certDir" .))) -}}
{{- else if $v.tls.redisStore -}}
{{- $_ := set $tls "store" (dict "redis" true) -}}
{{- end -}}
{{- with $v.tls.defaultCertificate -}}{{- $_ := set $tls "default_certificate" . -}}{{- end -}}
{{- if and $redis $v.redis.shareSessions -}}
{{- $_ := set $tls "tickets" "cluster" -}}
{{- $_ := set $tls "session_cache" "redis" -}}
{{- end -}}
{{- if $tls -}}{{- $_ := set $cfg "tls" $tls -}}{{- end -}}
{{- /* redis */ -}}
{{- if $redis -}}
{{- $r := dict "prefix" $v.redis.prefix "secret_file" (printf "%s/%s" $secretDir $v.secret.keys.clusterKey) -}}
{{- if $v.redis.url -}}
{{- $_ := set $r "url" $v.redis.url -}}
{{- else if $v.redis.sentinel -}}
{{- $_ := set $r "sentinel" $v.redis.sentinel -}}
{{- else -}}
{{- $_ := set $r "cluster" $v.redis.cluster -}}
{{- end -}}
{{- with $v.redis.username -}}{{- $_ := set $r "username" . -}}{{- end -}}
{{- if or $v.redis.password $v.redis.passwordFromSecret -}}
{{- $_ := set $r "password_file" (printf "%s/%s" $secretDir $v.secret.keys.redisPassword) -}}
{{- end -}}
{{- if $v.redis.caSecret.name -}}
{{- $_ := set $r "tls" (dict "ca" (printf "/run/secrets/gatehouse-redis-ca/%s" $v.redis.caSecret.key)) -}}
{{- end -}}
{{- $_ := set $cfg "redis" $r -}}
{{- end -}}
{{- /* traffic */ -}}
{{- $upstreams := deepCopy ($c.upstreams | default dict) -}}
{{- $sites := deepCopy ($c.sites | default dict) -}}
{{- if $c.demoBackend -}}
{{- $_ := set $cfg "demo_backend" "127.0.0.1:8081" -}}
{{- if not $sites -}}
{{- $_ := set $upstreams "demo" (dict "targets" (list "127.0.0.1:8081")) -}}
{{- $_ := set $sites "default" (dict "hosts" (list "*") "routes" (list (dict "path" "/" "upstream" "demo"))) -}}
{{- end -}}
{{- end -}}
{{- with $upstreams -}}{{- $_ := set $cfg "upstreams" . -}}{{- end -}}
{{- with $sites -}}{{- $_ := set $cfg "sites" . -}}{{- end -}}
{{- with $c.services -}}{{- $_ := set $cfg "services" . -}}{{- end -}}
{{- with $c.apps -}}{{- $_ := set $cfg "apps" . -}}{{- end -}}
{{- with $c.plans -}}{{- $_ := set $cfg "plans" . -}}{{- end -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/* The configuration as a map: config.raw as written, or the generated one with config.extra over it. */}}
{{- define "gatehouse.configMap" -}}
{{- if .Values.config.raw -}}
{{- toYaml (fromYaml .Values.config.raw) -}}
{{- else -}}
{{- $cfg := fromYaml (include "gatehouse.generatedConfig" .) -}}
{{- toYaml (mustMergeOverwrite $cfg (deepCopy (.Values.config.extra | default dict))) -}}
{{- end -}}
{{- end -}}

{{/* The configuration file's text, as the ConfigMap holds it. */}}
{{- define "gatehouse.configText" -}}
{{- if .Values.config.raw -}}
{{- .Values.config.raw -}}
{{- else -}}
# Generated by the gatehouse Helm chart from its values; docs/config.md describes every key.
{{ include "gatehouse.configMap" . }}
{{- end -}}
{{- end -}}

{{/*
The settings a reload does not change (docs/config.md, "Reloading"): a change to one of them has
to restart the pods, whatever config.reload says.
*/}}
{{- define "gatehouse.restartOnlyConfig" -}}
{{- $cfg := fromYaml (include "gatehouse.configMap" .) -}}
{{- $keep := pick $cfg "workers" "reuse_port" "cpu_affinity" "admin" "node" "control" "demo_backend" "redis" -}}
{{- $tls := $cfg.tls | default dict -}}
{{- $_ := set $keep "tls" (pick $tls "tickets" "session_cache") -}}
{{- toYaml $keep -}}
{{- end -}}
