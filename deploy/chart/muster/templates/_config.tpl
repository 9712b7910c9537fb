{{/* The scheduler configuration (docs/configuration.md), from the values. */}}
{{- define "muster.config" -}}
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: {{ .Values.percentageOfNodesToScore }}
podInitialBackoffSeconds: {{ .Values.podInitialBackoffSeconds }}
podMaxBackoffSeconds: {{ .Values.podMaxBackoffSeconds }}
leaderElection:
  leaderElect: true
  leaseDuration: {{ .Values.leaderElection.leaseDuration }}
  renewDeadline: {{ .Values.leaderElection.renewDeadline }}
  retryPeriod: {{ .Values.leaderElection.retryPeriod }}
  resourceLock: leases
  # The Role grants get/update on this Lease name only.
  resourceName: {{ include "muster.fullname" . }}
  resourceNamespace: {{ .Release.Namespace }}
profiles:
{{- range required "schedulerNames must list at least one name" .Values.schedulerNames }}
  - schedulerName: {{ . }}
    pluginConfig:
      - name: NodeResourcesFit
        args:
          scoringStrategy:
            {{- toYaml $.Values.scoringStrategy | nindent 12 }}
      - name: GangScheduling
        args:
          permitWaitingTimeSeconds: {{ $.Values.gang.permitWaitingTimeSeconds }}
          podGroupBackoffSeconds: {{ $.Values.gang.podGroupBackoffSeconds }}
{{- end }}
{{- end -}}
