{{/*
The chart's alerts (prometheusRule.defaultRules), as a YAML list of rules.
Every metric they name is one the binary exports (charts/alerts_test.go
checks it, and runs promtool's rule tests in charts/testdata on them).
$labels in annotations is Prometheus's templating, kept literal here.
*/}}
{{- define "cad.alerts" -}}
{{- $d := .Values.prometheusRule.defaultRules -}}
{{- $s := tpl ($d.selector | default "") . -}}
{{- $sel := ternary "" (printf "%s," $s) (eq $s "") -}}
{{- $for := $d.pendingPodsFor | default "15m" -}}
{{- $runbook := "https://github.com/doks-autoscaler/cluster-autoscaler/blob/main/docs/troubleshooting.md" -}}
{{- $labels := $d.labels | default dict -}}
{{- /*
Only the leader runs the loop; the standby serves /metrics too, with its plain
gauges (cluster_safe_to_autoscale, the rate-limit gauges, ...) at their zero
value. The leader, and only it, exports last_activity{activity="main"} (a
replica that loses the Lease exits and restarts as a standby), so a plain
gauge is read from the leader with $leader: the same target's series, matched
on every label but activity.
*/ -}}
{{- $leader := printf "and ignoring (activity) cluster_autoscaler_last_activity{%sactivity=\"main\"}" $sel -}}
- alert: ClusterAutoscalerDown
  # Only the leader runs the loop and exports last_activity; no series
  # means no replica holds the Lease, or none is scraped.
  expr: absent(cluster_autoscaler_last_activity{ {{- $sel }}activity="main"})
  for: 10m
  labels:
    severity: critical
    {{- with $labels }}{{ toYaml . | nindent 4 }}{{ end }}
  annotations:
    summary: No cluster-autoscaler replica is running its loop.
    description: No leader has exported cluster_autoscaler_last_activity for 10 minutes; pending pods get no nodes and unneeded nodes stay.
    runbook_url: {{ $runbook }}#the-autoscaler-is-down-or-has-no-leader
- alert: ClusterAutoscalerNotSucceeding
  # A loop that runs but fails (DigitalOcean API, Kubernetes API) leaves
  # mainSuccessful behind main.
  expr: |-
    time() - max(cluster_autoscaler_last_activity{ {{- $sel }}activity="mainSuccessful"}) > 900
    or (max(cluster_autoscaler_last_activity{ {{- $sel }}activity="main"}) and on() absent(cluster_autoscaler_last_activity{ {{- $sel }}activity="mainSuccessful"}))
  for: 5m
  labels:
    severity: critical
    {{- with $labels }}{{ toYaml . | nindent 4 }}{{ end }}
  annotations:
    summary: The cluster-autoscaler loop has not succeeded for 15 minutes.
    description: The loop runs but every iteration fails; its log and errors_total say why.
    runbook_url: {{ $runbook }}#the-autoscaler-is-down-or-has-no-leader
- alert: ClusterAutoscalerPendingPodsNotScaling
  # Scale-ups of existing pools and pools created on demand both count.
  expr: |-
    sum(cluster_autoscaler_unschedulable_pods_count{ {{- $sel }}type="unschedulable"}) > 0
    and on()
    ((sum(increase(cluster_autoscaler_scaled_up_nodes_total{ {{- $s }}}[{{ $for }}])) or vector(0))
      + (sum(increase(cluster_autoscaler_created_node_groups_total{ {{- $s }}}[{{ $for }}])) or vector(0))) == 0
  for: {{ $for }}
  labels:
    severity: warning
    {{- with $labels }}{{ toYaml . | nindent 4 }}{{ end }}
  annotations:
    summary: 'Pods have been unschedulable for {{ $for }} and no node was added.'
    description: '{{ "{{" }} $value {{ "}}" }} unschedulable pods; their NotTriggerScaleUp events say why no pool could take them.'
    runbook_url: {{ $runbook }}#pods-pending-with-no-scale-up
- alert: ClusterAutoscalerScaleUpFailed
  # increase() misses the first failure of a series created by it (a GPU
  # or DRA pool's labels are not exported before its first failure): a series
  # born in the last 30 minutes counts whole, provided the leader was scraped
  # 30 minutes ago (else after a gap in Prometheus's data every series would
  # look new). for: keeps one evaluation over a partial scrape from paging.
  expr: |-
    sum by (reason) (
      (
        (cluster_autoscaler_failed_scale_ups_total{ {{- $s }}} unless cluster_autoscaler_failed_scale_ups_total{ {{- $s }}} offset 30m)
        and on () count(cluster_autoscaler_last_activity{ {{- $sel }}activity="main"} offset 30m)
      )
      or increase(cluster_autoscaler_failed_scale_ups_total{ {{- $s }}}[30m])
    ) > 0
  for: 5m
  labels:
    severity: warning
    {{- with $labels }}{{ toYaml . | nindent 4 }}{{ end }}
  annotations:
    summary: 'Scale-ups failed in the last 30 minutes ({{ "{{" }} $labels.reason {{ "}}" }}).'
    description: 'timeout: nodes did not register within --max-node-provision-time; cloudProviderError: DigitalOcean refused the resize or creation.'
    runbook_url: {{ $runbook }}#pods-pending-with-no-scale-up
- alert: ClusterAutoscalerNodeGroupBackoff
  expr: max by (node_group, reason) (cluster_autoscaler_node_group_backoff_status{ {{- $s }}}) == 1
  for: 15m
  labels:
    severity: warning
    {{- with $labels }}{{ toYaml . | nindent 4 }}{{ end }}
  annotations:
    summary: 'Node pool {{ "{{" }} $labels.node_group {{ "}}" }} has been backed off for 15 minutes ({{ "{{" }} $labels.reason {{ "}}" }}).'
    description: The autoscaler does not grow this pool after failed scale-ups; the status ConfigMap and its events name the failure.
    runbook_url: {{ $runbook }}#pods-pending-with-no-scale-up
- alert: ClusterAutoscalerDigitalOceanForbidden
  # A rotated token draws 401s until the kubelet refreshes the mounted
  # Secret, and a later success shows the token works: a 401 counts while no
  # call at all has succeeded for 5 minutes, a 403 (a scope this operation
  # lacks) while that operation has not succeeded for 15. Warning: a token
  # refused everywhere also stops the loop, and ClusterAutoscalerNotSucceeding
  # pages for that.
  expr: |-
    (
      sum by (operation, code) (increase(cluster_autoscaler_digitalocean_api_requests_total{ {{- $sel }}code="401"}[15m])) > 0
      unless on () sum(increase(cluster_autoscaler_digitalocean_api_requests_total{ {{- $sel }}code=~"2.."}[5m])) > 0
    )
    or
    (
      sum by (operation, code) (increase(cluster_autoscaler_digitalocean_api_requests_total{ {{- $sel }}code="403"}[15m])) > 0
      unless on (operation) sum by (operation) (increase(cluster_autoscaler_digitalocean_api_requests_total{ {{- $sel }}code=~"2.."}[15m])) > 0
    )
  for: 10m
  labels:
    severity: warning
    {{- with $labels }}{{ toYaml . | nindent 4 }}{{ end }}
  annotations:
    summary: 'DigitalOcean has been answering {{ "{{" }} $labels.code {{ "}}" }} to {{ "{{" }} $labels.operation {{ "}}" }} for 10 minutes.'
    description: The API token is revoked, expired or lacks a scope this operation needs (docs/digitalocean.md lists them).
    runbook_url: {{ $runbook }}#403-or-401-from-digitalocean
- alert: ClusterAutoscalerDigitalOceanRateLimited
  expr: sum(increase(cluster_autoscaler_digitalocean_api_requests_total{ {{- $sel }}code="429"}[10m])) > 0
  for: 10m
  labels:
    severity: warning
    {{- with $labels }}{{ toYaml . | nindent 4 }}{{ end }}
  annotations:
    summary: DigitalOcean has been answering 429 (rate limited) for 10 minutes.
    description: The token's request budget is spent, often by other tools sharing it; decisions wait for the window to reset.
    runbook_url: {{ $runbook }}#429-from-digitalocean
- alert: ClusterAutoscalerDigitalOceanErrors
  expr: |-
    sum(rate(cluster_autoscaler_digitalocean_api_requests_total{ {{- $sel }}code=~"5..|error"}[10m]))
      / sum(rate(cluster_autoscaler_digitalocean_api_requests_total{ {{- $s }}}[10m])) > 0.1
  for: 15m
  labels:
    severity: warning
    {{- with $labels }}{{ toYaml . | nindent 4 }}{{ end }}
  annotations:
    summary: 'More than 10% of DigitalOcean API calls fail with 5xx or no answer.'
    description: 'Calls are retried where safe; pool creations and deletions are reconciled by listing. Check https://status.digitalocean.com.'
    runbook_url: {{ $runbook }}#5xx-or-timeouts-from-digitalocean
- alert: ClusterAutoscalerClusterUnsafe
  # The leader's verdict: the standby exports the gauge at 0.
  expr: min(cluster_autoscaler_cluster_safe_to_autoscale{ {{- $s }}} {{ $leader }}) == 0
  for: 15m
  labels:
    severity: warning
    {{- with $labels }}{{ toYaml . | nindent 4 }}{{ end }}
  annotations:
    summary: The cluster has been unsafe to autoscale for 15 minutes.
    description: Too many nodes are unready (--max-total-unready-percentage, --ok-total-unready-count); the autoscaler neither adds nor removes nodes.
    runbook_url: {{ $runbook }}#cluster-unsafe-to-autoscale
- alert: ClusterAutoscalerCreatedPoolEmpty
  # The metrics do not name created pools; a created pool's droplets that
  # never become Nodes show as longUnregistered.
  expr: |-
    sum(cluster_autoscaler_node_groups_count{ {{- $sel }}node_group_type="autoprovisioned"}) > 0
    and on()
    sum(cluster_autoscaler_nodes_count{ {{- $sel }}state="longUnregistered"}) > 0
  for: 15m
  labels:
    severity: warning
    {{- with $labels }}{{ toYaml . | nindent 4 }}{{ end }}
  annotations:
    summary: Pools the autoscaler created exist while droplets stay without a Node.
    description: Droplets have not registered within --max-node-provision-time; a created pool may hold no Node at all.
    runbook_url: {{ $runbook }}#a-created-pool-stays-empty
- alert: ClusterAutoscalerHourlyCostNearLimit
  # The leader's figures: the standby exports both gauges at 0. No limit
  # (--max-hourly-cost 0) never pages.
  expr: |-
    max(cluster_autoscaler_hourly_cost_total{ {{- $s }}} {{ $leader }})
      >= {{ $d.hourlyCostRatio | default 0.9 }} * max(cluster_autoscaler_hourly_cost_limit{ {{- $s }}} {{ $leader }})
    and on() max(cluster_autoscaler_hourly_cost_limit{ {{- $s }}} {{ $leader }}) > 0
  for: 15m
  labels:
    severity: warning
    {{- with $labels }}{{ toYaml . | nindent 4 }}{{ end }}
  annotations:
    summary: 'The autoscaled node pools cost {{ "{{" }} $value | printf "%.2f" {{ "}}" }} USD an hour, near --max-hourly-cost.'
    description: 'Past the limit no node is bought: pending pods get NotTriggerScaleUp naming the limit and the figures (docs/limits.md).'
    runbook_url: {{ $runbook }}#spend-near-the-hourly-limit
{{- end -}}
