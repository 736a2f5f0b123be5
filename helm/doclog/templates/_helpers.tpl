{{/* The chart's name, truncated to 63 characters (a DNS label). */}}
{{- define "doclog.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The prefix of every resource name: <release>-doclog unless overridden. */}}
{{- define "doclog.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Labels on every resource. */}}
{{- define "doclog.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "doclog.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: doclog
{{- end }}

{{/* Labels that select this release's pods (add a component for one role). */}}
{{- define "doclog.selectorLabels" -}}
app.kubernetes.io/name: {{ include "doclog.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The image reference. */}}
{{- define "doclog.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* Partitions of the write-ready topic (0 means the jobs topic's). */}}
{{- define "doclog.writeReadyPartitions" -}}
{{- if gt (int .Values.topics.writeReadyPartitions) 0 }}{{ int .Values.topics.writeReadyPartitions }}{{ else }}{{ int .Values.topics.jobsPartitions }}{{ end }}
{{- end }}

{{/*
doclog.validate fails rendering on values that cannot work, so the mistake
shows at `helm install`/`helm template` rather than as idle pods or a crash
loop. Included once, from the ConfigMap.
*/}}
{{- define "doclog.validate" -}}
{{- $parts := int .Values.topics.jobsPartitions }}
{{- if lt $parts 1 }}
{{- fail "topics.jobsPartitions must be at least 1" }}
{{- end }}
{{- if .Values.executor.enabled }}
{{- if .Values.executor.autoscaling.enabled }}
{{- $hpa := .Values.executor.autoscaling }}
{{- if gt (int $hpa.maxReplicas) $parts }}
{{- fail (printf "executor.autoscaling.maxReplicas (%d) exceeds topics.jobsPartitions (%d): executors beyond the partition count get no partition and sit idle; raise the partitions when creating the topic or lower maxReplicas" (int $hpa.maxReplicas) $parts) }}
{{- end }}
{{- if lt (int $hpa.minReplicas) 1 }}
{{- fail "executor.autoscaling.minReplicas must be at least 1" }}
{{- end }}
{{- if gt (int $hpa.minReplicas) (int $hpa.maxReplicas) }}
{{- fail (printf "executor.autoscaling.minReplicas (%d) exceeds maxReplicas (%d)" (int $hpa.minReplicas) (int $hpa.maxReplicas)) }}
{{- end }}
{{- else if gt (int .Values.executor.replicas) $parts }}
{{- fail (printf "executor.replicas (%d) exceeds topics.jobsPartitions (%d): executors beyond the partition count sit idle" (int .Values.executor.replicas) $parts) }}
{{- end }}
{{- end }}
{{- if and .Values.projectors.enabled (gt (int .Values.projectors.replicas) (int (include "doclog.writeReadyPartitions" .))) }}
{{- fail (printf "projectors.replicas (%d) exceeds the write-ready partition count (%s)" (int .Values.projectors.replicas) (include "doclog.writeReadyPartitions" .)) }}
{{- end }}
{{- if lt (int .Values.topics.replicationFactor) (int .Values.topics.minInsyncReplicas) }}
{{- fail (printf "topics.minInsyncReplicas (%d) exceeds topics.replicationFactor (%d): nothing could be produced with acks=all" (int .Values.topics.minInsyncReplicas) (int .Values.topics.replicationFactor)) }}
{{- end }}
{{- if and (or .Values.ingest.enabled .Values.executor.enabled .Values.projectors.enabled) (empty .Values.kafka.seeds) }}
{{- fail "kafka.seeds is required: list the bootstrap brokers as host:port" }}
{{- end }}
{{- $results := toString .Values.retention.jobResults }}
{{- $jobs := toString .Values.topics.jobsRetention }}
{{- if and (regexMatch "^[0-9]+h$" $results) (regexMatch "^[0-9]+h$" $jobs) (lt (int (trimSuffix "h" $results)) (int (trimSuffix "h" $jobs))) }}
{{- fail (printf "retention.jobResults (%s) is shorter than topics.jobsRetention (%s): a job re-delivered after its result expired would be applied again" $results $jobs) }}
{{- end }}
{{- if lt (int .Values.postgres.maxConns) 2 }}
{{- fail (printf "postgres.maxConns must be at least 2, got %d" (int .Values.postgres.maxConns)) }}
{{- end }}
{{- if gt (int .Values.postgres.minConns) (int .Values.postgres.maxConns) }}
{{- fail (printf "postgres.minConns (%d) exceeds postgres.maxConns (%d)" (int .Values.postgres.minConns) (int .Values.postgres.maxConns)) }}
{{- end }}
{{- if empty .Values.postgres.existingSecret }}
{{- fail "postgres.existingSecret is required: name a Secret holding the Postgres URL under postgres.urlKey" }}
{{- end }}
{{- if and .Values.clickhouse.enabled (empty .Values.clickhouse.existingSecret) }}
{{- fail "clickhouse.existingSecret is required when clickhouse.enabled is true" }}
{{- end }}
{{- if and .Values.kafka.sasl.mechanism (empty .Values.kafka.sasl.existingSecret) }}
{{- fail "kafka.sasl.existingSecret is required when kafka.sasl.mechanism is set" }}
{{- end }}
{{- if and .Values.kafka.sasl.mechanism (not (has (upper .Values.kafka.sasl.mechanism) (list "PLAIN" "SCRAM-SHA-256" "SCRAM-SHA-512"))) }}
{{- fail (printf "kafka.sasl.mechanism %q is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512" .Values.kafka.sasl.mechanism) }}
{{- end }}
{{- if ne (empty .Values.kafka.tls.certKey) (empty .Values.kafka.tls.keyKey) }}
{{- fail "kafka.tls.certKey and kafka.tls.keyKey go together: set both for mutual TLS, or neither" }}
{{- end }}
{{- if and .Values.kafka.tls.existingSecret (not .Values.kafka.tls.enabled) }}
{{- fail "kafka.tls.existingSecret is set but kafka.tls.enabled is false" }}
{{- end }}
{{- $httpTLS := .Values.httpTLS }}
{{- if and (not $httpTLS.existingSecret) (or $httpTLS.clientCAKey $httpTLS.ops) }}
{{- fail "httpTLS.clientCAKey and httpTLS.ops need httpTLS.existingSecret: name the Secret holding the servers' certificate and key" }}
{{- end }}
{{- if and $httpTLS.existingSecret (or (empty $httpTLS.certKey) (empty $httpTLS.keyKey)) }}
{{- fail "httpTLS.certKey and httpTLS.keyKey must name the certificate's and the key's keys in httpTLS.existingSecret" }}
{{- end }}
{{- if and .Values.auth.existingSecret (not (or .Values.auth.tokensKey .Values.auth.writeTokensKey .Values.auth.readTokensKey)) }}
{{- fail "auth.existingSecret is set but none of auth.tokensKey, auth.writeTokensKey, auth.readTokensKey names a key in it" }}
{{- end }}
{{- end }}

{{/* Directory the credentials are mounted at, one file each. */}}
{{- define "doclog.secretsDir" -}}/etc/doclog/secrets{{- end }}

{{/*
doclog.secretFiles lists the credentials a pod reads, as YAML under "files":
each names the variable doclog reads the file's path from
(DOCLOG_<FLAG>_FILE), the file, and the Secret and key it is projected from.
They reach the process as files, never as variables: a variable's value
sits in the process's environment, which every child inherits and
/proc/<pid>/environ shows. Called with a dict: root (the chart context) and
databaseOnly (true for the migration hook).
*/}}
{{- define "doclog.secretFiles" -}}
{{- $v := .root.Values }}
files:
  - {var: DOCLOG_DATABASE_URL_FILE, file: database-url, secret: {{ $v.postgres.existingSecret | quote }}, key: {{ $v.postgres.urlKey | quote }}}
{{- if not .databaseOnly }}
{{- if $v.kafka.sasl.mechanism }}
  - {var: DOCLOG_KAFKA_SASL_USERNAME_FILE, file: kafka-sasl-username, secret: {{ $v.kafka.sasl.existingSecret | quote }}, key: {{ $v.kafka.sasl.usernameKey | quote }}}
  - {var: DOCLOG_KAFKA_SASL_PASSWORD_FILE, file: kafka-sasl-password, secret: {{ $v.kafka.sasl.existingSecret | quote }}, key: {{ $v.kafka.sasl.passwordKey | quote }}}
{{- end }}
{{- if $v.clickhouse.enabled }}
  - {var: DOCLOG_CLICKHOUSE_URL_FILE, file: clickhouse-url, secret: {{ $v.clickhouse.existingSecret | quote }}, key: {{ $v.clickhouse.urlKey | quote }}}
{{- end }}
{{- if $v.auth.existingSecret }}
{{- with $v.auth.tokensKey }}
  - {var: DOCLOG_AUTH_TOKENS_FILE, file: auth-tokens, secret: {{ $v.auth.existingSecret | quote }}, key: {{ . | quote }}}
{{- end }}
{{- with $v.auth.writeTokensKey }}
  - {var: DOCLOG_AUTH_WRITE_TOKENS_FILE, file: auth-write-tokens, secret: {{ $v.auth.existingSecret | quote }}, key: {{ . | quote }}}
{{- end }}
{{- with $v.auth.readTokensKey }}
  - {var: DOCLOG_AUTH_READ_TOKENS_FILE, file: auth-read-tokens, secret: {{ $v.auth.existingSecret | quote }}, key: {{ . | quote }}}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/* The variables naming the credential files; called like doclog.secretFiles. */}}
{{- define "doclog.secretEnv" -}}
{{- range (include "doclog.secretFiles" . | fromYaml).files }}
- name: {{ .var }}
  value: {{ printf "%s/%s" (include "doclog.secretsDir" nil) .file | quote }}
{{- end }}
{{- end }}

{{/*
The volume of the credential files, projected from the Secrets; called like
doclog.secretFiles. Readable by the pod's group (fsGroup) alone, and not
through subPath mounts, which would not see a rotated Secret.
*/}}
{{- define "doclog.secretVolume" -}}
- name: secrets
  projected:
    # 0440: the owner and the pod's fsGroup read, nobody writes.
    defaultMode: 288
    sources:
      {{- range (include "doclog.secretFiles" . | fromYaml).files }}
      - secret:
          name: {{ .secret }}
          items:
            - key: {{ .key }}
              path: {{ .file }}
      {{- end }}
{{- end }}

{{/* Directory the HTTP servers' certificate Secret is mounted at. */}}
{{- define "doclog.httpTLSDir" -}}/etc/doclog/http-tls{{- end }}

{{/* Directory the signature keys' Secret is mounted at, one file per key. */}}
{{- define "doclog.signatureKeysDir" -}}/etc/doclog/signature-keys{{- end }}

{{/* Directory the Kafka TLS Secret is mounted at. */}}
{{- define "doclog.kafkaTLSDir" -}}/etc/doclog/kafka-tls{{- end }}

{{/*
doclog.deployment renders one role's Deployment. Called with a dict:
root (the chart context), role (its name) and spec (its values).
*/}}
{{- define "doclog.deployment" -}}
{{- $root := .root }}
{{- $role := .role }}
{{- $spec := .spec }}
{{- $api := or (eq $role "ingest") (eq $role "readstore") }}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "doclog.fullname" $root }}-{{ $role }}
  labels:
    {{- include "doclog.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ $role }}
spec:
  {{- if not (and (eq $role "executor") $spec.autoscaling.enabled) }}
  replicas: {{ $spec.replicas }}
  {{- end }}
  revisionHistoryLimit: 5
  selector:
    matchLabels:
      {{- include "doclog.selectorLabels" $root | nindent 6 }}
      app.kubernetes.io/component: {{ $role }}
  strategy:
    type: RollingUpdate
    rollingUpdate:
      {{- if $api }}
      maxSurge: 25%
      maxUnavailable: 0
      {{- else }}
      # Consumers: replace one member at a time, so the group rebalances
      # once per pod rather than all at once.
      maxSurge: 1
      maxUnavailable: 0
      {{- end }}
  template:
    metadata:
      labels:
        {{- include "doclog.selectorLabels" $root | nindent 8 }}
        app.kubernetes.io/component: {{ $role }}
        doclog.io/scrape: "true"
        {{- with $root.Values.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      annotations:
        # Roll the pods when their settings change.
        checksum/config: {{ include (print $root.Template.BasePath "/configmap.yaml") $root | sha256sum }}
        {{- with $root.Values.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      {{- with $root.Values.serviceAccountName }}
      serviceAccountName: {{ . }}
      {{- end }}
      automountServiceAccountToken: false
      {{- with $root.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      securityContext:
        {{- toYaml $root.Values.podSecurityContext | nindent 8 }}
      terminationGracePeriodSeconds: {{ $spec.terminationGracePeriodSeconds }}
      containers:
        - name: {{ $role }}
          image: {{ include "doclog.image" $root }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          command: ["doclog"]
          args: ["serve", "--roles={{ $role }}"]
          ports:
            {{- if $api }}
            - name: http
              containerPort: {{ $root.Values.ports.http }}
              protocol: TCP
            {{- end }}
            - name: ops
              containerPort: {{ $root.Values.ports.ops }}
              protocol: TCP
          envFrom:
            - configMapRef:
                name: {{ include "doclog.fullname" $root }}
          env:
            # Static membership: a container restarted in its pod (a crash,
            # an OOM kill) takes its partitions back at once.
            - name: DOCLOG_MEMBER_NAME
              valueFrom:
                fieldRef:
                  fieldPath: metadata.name
            {{- include "doclog.secretEnv" (dict "root" $root) | trim | nindent 12 }}
            {{- if and $spec.resources $spec.resources.limits $spec.resources.limits.memory }}
            # The Go runtime's soft memory limit at the container's: the
            # collector works harder as the heap nears it, rather than the
            # pod being killed (serve raises the collector's target above
            # Go's default). extraEnv may set another.
            - name: GOMEMLIMIT
              valueFrom:
                resourceFieldRef:
                  resource: limits.memory
            {{- end }}
            {{- with $root.Values.extraEnv }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          startupProbe:
            httpGet:
              path: /healthz
              port: ops
              {{- if $root.Values.httpTLS.ops }}
              scheme: HTTPS
              {{- end }}
            {{- toYaml $root.Values.probes.startup | nindent 12 }}
          livenessProbe:
            httpGet:
              path: /healthz
              port: ops
              {{- if $root.Values.httpTLS.ops }}
              scheme: HTTPS
              {{- end }}
            {{- toYaml $root.Values.probes.liveness | nindent 12 }}
          readinessProbe:
            httpGet:
              path: /readyz
              port: ops
              {{- if $root.Values.httpTLS.ops }}
              scheme: HTTPS
              {{- end }}
            {{- toYaml $root.Values.probes.readiness | nindent 12 }}
          resources:
            {{- toYaml $spec.resources | nindent 12 }}
          securityContext:
            {{- toYaml $root.Values.securityContext | nindent 12 }}
          volumeMounts:
            - name: tmp
              mountPath: /tmp
            - name: secrets
              mountPath: {{ include "doclog.secretsDir" $root }}
              readOnly: true
            {{- if $root.Values.httpTLS.existingSecret }}
            - name: http-tls
              mountPath: {{ include "doclog.httpTLSDir" $root }}
              readOnly: true
            {{- end }}
            {{- if $root.Values.kafka.tls.existingSecret }}
            - name: kafka-tls
              mountPath: {{ include "doclog.kafkaTLSDir" $root }}
              readOnly: true
            {{- end }}
            {{- if $root.Values.signatures.existingSecret }}
            - name: signature-keys
              mountPath: {{ include "doclog.signatureKeysDir" $root }}
              readOnly: true
            {{- end }}
            {{- with $root.Values.extraVolumeMounts }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
      volumes:
        # The root filesystem is read-only; this is the only writable path.
        - name: tmp
          emptyDir:
            sizeLimit: 64Mi
        {{- include "doclog.secretVolume" (dict "root" $root) | nindent 8 }}
        {{- with $root.Values.httpTLS }}
        {{- if .existingSecret }}
        # Mounted whole, not through subPath, so a renewed certificate
        # reaches the files doclog re-reads.
        - name: http-tls
          secret:
            secretName: {{ .existingSecret }}
            defaultMode: 288
            items:
              - key: {{ .certKey }}
                path: {{ .certKey }}
              - key: {{ .keyKey }}
                path: {{ .keyKey }}
              {{- with .clientCAKey }}
              - key: {{ . }}
                path: {{ . }}
              {{- end }}
        {{- end }}
        {{- end }}
        {{- if $root.Values.kafka.tls.existingSecret }}
        - name: kafka-tls
          secret:
            secretName: {{ $root.Values.kafka.tls.existingSecret }}
        {{- end }}
        {{- with $root.Values.signatures.existingSecret }}
        # Every key of the Secret is a key file, named by its key id.
        - name: signature-keys
          secret:
            secretName: {{ . }}
            defaultMode: 288
        {{- end }}
        {{- with $root.Values.extraVolumes }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      # Spread a role's replicas over nodes and zones, so one node's loss
      # takes at most a share of each role.
      topologySpreadConstraints:
        - maxSkew: 1
          topologyKey: kubernetes.io/hostname
          whenUnsatisfiable: ScheduleAnyway
          labelSelector:
            matchLabels:
              {{- include "doclog.selectorLabels" $root | nindent 14 }}
              app.kubernetes.io/component: {{ $role }}
        - maxSkew: 1
          topologyKey: topology.kubernetes.io/zone
          whenUnsatisfiable: ScheduleAnyway
          labelSelector:
            matchLabels:
              {{- include "doclog.selectorLabels" $root | nindent 14 }}
              app.kubernetes.io/component: {{ $role }}
      {{- with $spec.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $spec.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $spec.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
{{- end }}
