{{/* Labels on every object's metadata: the kustomize install's part-of, Helm's own, and commonLabels. */}}
{{- define "multus-proxy.labels" -}}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{ include "multus-proxy.labelsUnmanaged" . }}
{{- end -}}

{{/* The same without managed-by, for the sidecar ClusterRoles, which the controller checks for
managed-by: multus-proxy-controller. */}}
{{- define "multus-proxy.labelsUnmanaged" -}}
app.kubernetes.io/part-of: multus-proxy
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The one image: repository@digest, else repository:tag (tag defaults to appVersion). */}}
{{- define "multus-proxy.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{- define "multus-proxy.imagePullSecrets" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Where the webhook's TLS Secret comes from. */}}
{{- define "multus-proxy.tlsSecret" -}}
{{- if eq .Values.certificates.mode "secret" -}}
{{ required "certificates.secret.existingSecret is required when certificates.mode=secret: the name of a kubernetes.io/tls Secret in the release namespace" .Values.certificates.secret.existingSecret }}
{{- else -}}
multus-proxy-webhook-tls
{{- end -}}
{{- end -}}

{{/* Anti-affinity spreading a component's replicas over nodes, unless affinity is given. */}}
{{- define "multus-proxy.affinity" -}}
{{- if .affinity }}
{{ toYaml .affinity }}
{{- else }}
podAntiAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            app.kubernetes.io/name: multus-proxy
            app.kubernetes.io/component: {{ .component }}
{{- end }}
{{- end -}}

{{/* Pod scheduling fields shared by the Deployments and the DaemonSet. */}}
{{- define "multus-proxy.scheduling" -}}
{{- with .nodeSelector }}
nodeSelector:
{{ toYaml . }}
{{- end }}
{{- with .tolerations }}
tolerations:
{{ toYaml . }}
{{- end }}
{{- with .priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- end -}}

{{- define "multus-proxy.validate" -}}
{{- if not (has .Values.certificates.mode (list "cert-manager" "bootstrap" "secret")) }}
{{- fail (printf "certificates.mode=%q: use cert-manager, bootstrap or secret" .Values.certificates.mode) }}
{{- end }}
{{- if not (has .Values.sidecar.mode (list "auto" "native" "regular")) }}
{{- fail (printf "sidecar.mode=%q: use auto, native or regular" .Values.sidecar.mode) }}
{{- end }}
{{- if not (has .Values.webhook.failurePolicy (list "Fail" "Ignore")) }}
{{- fail (printf "webhook.failurePolicy=%q: use Fail or Ignore" .Values.webhook.failurePolicy) }}
{{- end }}
{{- if not (has .Values.webhook.selectedPods.failurePolicy (list "" "Fail" "Ignore")) }}
{{- fail (printf "webhook.selectedPods.failurePolicy=%q: use Fail or Ignore, or leave it empty for webhook.failurePolicy" .Values.webhook.selectedPods.failurePolicy) }}
{{- end }}
{{- if not (has .Values.webhook.podSecurityDefault (list "privileged" "baseline" "restricted")) }}
{{- fail (printf "webhook.podSecurityDefault=%q: use privileged, baseline or restricted" .Values.webhook.podSecurityDefault) }}
{{- end }}
{{- if and (eq .Values.certificates.mode "secret") (not .Values.certificates.secret.caBundle) }}
{{- fail "certificates.secret.caBundle is required when certificates.mode=secret: the PEM of the CA that signed the Secret's certificate" }}
{{- end }}
{{- end -}}

{{/* The certificate bootstrap pod, shared by the Job and the renewal CronJob. */}}
{{- define "multus-proxy.certsPod" -}}
metadata:
  labels:
    app.kubernetes.io/name: multus-proxy
    app.kubernetes.io/component: certs
spec:
  restartPolicy: OnFailure
  serviceAccountName: multus-proxy-certs
  {{- include "multus-proxy.imagePullSecrets" . | nindent 2 }}
  securityContext:
    runAsNonRoot: true
    runAsUser: 65532
    runAsGroup: 65532
    seccompProfile:
      type: RuntimeDefault
  containers:
    - name: certs
      image: {{ include "multus-proxy.image" . }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      command: [node, /app/dist/certs.js]
      args:
        - bootstrap
        - --namespace={{ .Release.Namespace }}
        - --service=multus-proxy-webhook
        - --secret=multus-proxy-webhook-tls
        - --ca-secret=multus-proxy-webhook-ca
        - --mutating=multus-proxy-webhook
        - --validating=multus-proxy-webhook
      resources:
        requests:
          cpu: 50m
          memory: 64Mi
        limits:
          memory: 192Mi
      securityContext:
        allowPrivilegeEscalation: false
        readOnlyRootFilesystem: true
        capabilities:
          drop: [ALL]
{{- end -}}


{{/* Annotations of an uninstall hook's objects: (list phase weight). Hook objects are not part of
the release: each is deleted when its hook succeeded, and before a new one is created. */}}
{{- define "multus-proxy.hookAnnotations" -}}
annotations:
  helm.sh/hook: {{ index . 0 }}
  helm.sh/hook-weight: {{ index . 1 | quote }}
  helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded
{{- end -}}

{{/* An uninstall hook: its ConfigMap (files/uninstall-hook.mjs) and the Job that runs it with its
ServiceAccount. dict: root, name, namespace, phase, args. */}}
{{- define "multus-proxy.hookJob" -}}
{{- $r := .root }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .name }}
  namespace: {{ .namespace }}
  labels:
    {{- include "multus-proxy.labels" $r | nindent 4 }}
  {{- include "multus-proxy.hookAnnotations" (list .phase "-10") | nindent 2 }}
data:
  uninstall-hook.mjs: |
    {{- $r.Files.Get "files/uninstall-hook.mjs" | nindent 4 }}
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ .name }}
  namespace: {{ .namespace }}
  labels:
    {{- include "multus-proxy.labels" $r | nindent 4 }}
  {{- include "multus-proxy.hookAnnotations" (list .phase "-10") | nindent 2 }}
---
apiVersion: batch/v1
kind: Job
metadata:
  name: {{ .name }}
  namespace: {{ .namespace }}
  labels:
    {{- include "multus-proxy.labels" $r | nindent 4 }}
    app.kubernetes.io/name: multus-proxy
    app.kubernetes.io/component: uninstall
  {{- include "multus-proxy.hookAnnotations" (list .phase "0") | nindent 2 }}
spec:
  backoffLimit: 2
  activeDeadlineSeconds: {{ add $r.Values.nodeAgent.cleanupTimeoutSeconds 60 }}
  template:
    metadata:
      labels:
        app.kubernetes.io/name: multus-proxy
        app.kubernetes.io/component: uninstall
    spec:
      restartPolicy: Never
      serviceAccountName: {{ .name }}
      {{- include "multus-proxy.imagePullSecrets" $r | nindent 6 }}
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        runAsGroup: 65532
        seccompProfile:
          type: RuntimeDefault
      containers:
        - name: uninstall
          image: {{ include "multus-proxy.image" $r }}
          imagePullPolicy: {{ $r.Values.image.pullPolicy }}
          command: [node, /hook/uninstall-hook.mjs]
          args:
            {{- toYaml .args | nindent 12 }}
          env:
            - name: NODE_EXTRA_CA_CERTS
              value: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt
          resources:
            requests:
              cpu: 10m
              memory: 48Mi
            limits:
              memory: 128Mi
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities:
              drop: [ALL]
          volumeMounts:
            - name: hook
              mountPath: /hook
              readOnly: true
      volumes:
        - name: hook
          configMap:
            name: {{ .name }}
{{- end -}}
