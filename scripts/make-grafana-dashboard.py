#!/usr/bin/env python3
"""Writes deploy/grafana/roomkit.json, the Grafana dashboard for roomd,
roombot and a roombot fleet, from the panel list below (edit here, then run
`python3 scripts/make-grafana-dashboard.py`). DeployRulesTests checks that
the file parses and that every expression names a documented metric family."""
import json, os

ROWS = [
    ("roomd", [
        ("roomd up", "stat", ['up{job="roomd"}']),
        ("Connections", "timeseries", ['roomd_connections']),
        ("Rooms, members, sessions", "timeseries", ['roomd_rooms', 'roomd_members', 'roomd_sessions']),
        ("Events appended /s", "timeseries", ['rate(roomd_events_total[1m])']),
        ("Inbound messages /s and bytes /s", "timeseries", ['rate(roomd_messages_in_total[1m])', 'rate(roomd_bytes_in_total[1m])']),
        ("Bytes out /s", "timeseries", ['rate(roomd_bytes_out_total[1m])']),
        ("Request p99 by op (s)", "timeseries", ['histogram_quantile(0.99, sum by (op, le) (rate(roomd_request_duration_seconds_bucket[5m])))']),
        ("Commit p99 and fan-out p99 (s)", "timeseries", [
            'histogram_quantile(0.99, sum by (le) (rate(roomd_append_commit_duration_seconds_bucket[5m])))',
            'histogram_quantile(0.99, sum by (le) (rate(roomd_fanout_duration_seconds_bucket[5m])))']),
        ("Commit failures", "timeseries", ['increase(roomd_commit_failures_total[5m])']),
        ("Errors sent /s by code", "timeseries", ['sum by (code) (rate(roomd_errors_total[1m]))']),
        ("Disconnects /s by close code", "timeseries", ['sum by (code) (rate(roomd_disconnects_total[1m]))']),
        ("Resumes by outcome /s", "timeseries", ['sum by (outcome) (rate(roomd_recoveries_total[5m]))']),
        ("Kicks, auth failures, refusals /s", "timeseries", [
            'rate(roomd_kicks_total[5m])', 'rate(roomd_auth_failures_total[5m])',
            'rate(roomd_requests_over_limit_total[5m])', 'sum by (limit) (rate(roomd_connections_refused_total[5m]))']),
        ("roomd memory and CPU", "timeseries", ['process_resident_memory_bytes{job="roomd"}', 'rate(process_cpu_seconds_total{job="roomd"}[1m])']),
    ]),
    ("roombot", [
        ("Connection up by server", "timeseries", ['roomkit_connection_up']),
        ("Rooms by reason", "timeseries", ['sum by (reason) (roombot_sessions)']),
        ("Events /s", "timeseries", ['rate(roombot_events_total[1m])']),
        ("Dispatch p99 by plugin (s)", "timeseries", ['histogram_quantile(0.99, sum by (plugin, le) (rate(roomkit_plugin_dispatch_seconds_bucket[5m])))']),
        ("Plugin call p99 by plugin and hook (s)", "timeseries", ['histogram_quantile(0.99, sum by (plugin, hook, le) (rate(roomkit_plugin_call_seconds_bucket[5m])))']),
        ("Login and resume p99 (s)", "timeseries", [
            'histogram_quantile(0.99, sum by (le) (rate(roomkit_login_seconds_bucket[5m])))',
            'histogram_quantile(0.99, sum by (le) (rate(roomkit_resume_seconds_bucket[5m])))']),
        ("URL chain p99 (s)", "timeseries", ['histogram_quantile(0.99, sum by (le) (rate(roomkit_url_interrupter_seconds_bucket[5m])))']),
        ("Reconnects by reason", "timeseries", ['sum by (reason) (increase(roomkit_reconnects_total[5m]))']),
        ("Kicks and login failures by code", "timeseries", [
            'sum by (code) (increase(roomkit_kicks_total[5m]))', 'sum by (code) (increase(roomkit_login_failures_total[5m]))']),
        ("Plugin failures /s", "timeseries", ['sum by (plugin) (rate(roombot_plugin_failures_total[5m]))']),
        ("Plugins quarantined", "timeseries", ['roombot_plugin_quarantined', 'increase(roombot_plugin_quarantines_total[1h])']),
        ("Plugin queue depth", "timeseries", ['roombot_plugin_queue_depth']),
        ("Plugin process crashes and restarts", "timeseries", [
            'increase(roombot_plugin_crashes_total[10m])', 'increase(roombot_plugin_restarts_total[10m])',
            'increase(roombot_plugin_dropped_events_total[10m])', 'increase(roombot_plugin_skipped_events_total[10m])']),
        ("Event-loop lag (s)", "timeseries", ['roombot_event_loop_lag_seconds']),
        ("roombot build", "table", ['roombot_build_info', 'roomd_build_info']),
    ]),
    ("fleet", [
        ("Redis up", "timeseries", ['roombot_fleet_redis_up']),
        ("Live hosts", "stat", ['max(roombot_fleet_live_hosts)']),
        ("Unhomed rooms", "stat", ['max(roombot_fleet_unhomed_rooms)']),
        ("Shards held by host", "timeseries", ['roombot_fleet_shards_held']),
        ("Claims and losses", "timeseries", ['increase(roombot_fleet_claims_total[5m])', 'increase(roombot_fleet_losses_total[5m])']),
        ("Fence refusals and hand-over resumes", "timeseries", [
            'increase(roombot_fleet_fence_refusals_total[5m])', 'increase(roombot_fleet_handover_resumes_total[5m])']),
    ]),
]

def main():
    panels, y, pid = [], 0, 1
    for title, items in ROWS:
        panels.append({"type": "row", "title": title, "id": pid, "collapsed": False,
                       "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": []})
        pid += 1; y += 1
        for index, (name, kind, exprs) in enumerate(items):
            panels.append({
                "type": kind, "title": name, "id": pid,
                "datasource": {"type": "prometheus", "uid": "${datasource}"},
                "gridPos": {"h": 8, "w": 8, "x": (index % 3) * 8, "y": y + (index // 3) * 8},
                "targets": [{"refId": chr(65 + n), "expr": e, "datasource": {"type": "prometheus", "uid": "${datasource}"}}
                            for n, e in enumerate(exprs)],
                "options": {}, "fieldConfig": {"defaults": {}, "overrides": []},
            })
            pid += 1
        y += ((len(items) + 2) // 3) * 8
    dashboard = {
        "title": "RoomKit: roomd, roombot and the fleet", "uid": "roomkit", "schemaVersion": 39, "version": 1,
        "editable": True, "time": {"from": "now-1h", "to": "now"}, "refresh": "30s", "tags": ["roomkit"],
        "templating": {"list": [{"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus"}]},
        "panels": panels,
    }
    path = os.path.join(os.path.dirname(__file__), "..", "deploy", "grafana", "roomkit.json")
    with open(path, "w") as out:
        json.dump(dashboard, out, indent=2)
        out.write("\n")

main()
