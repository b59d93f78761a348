import RoomKitMetrics

extension BotMetrics {
    /// `# HELP` text of every family on roombot's `/metrics`: its own, the
    /// engine's (`roomkit_*`), the fleet's and the process's. docs/DASHBOARD.md
    /// lists the same names (a test compares them with a real scrape).
    static let help: [String: String] = ProcessMetrics.help.merging(FleetMetrics.help) { $1 }.merging([
        "roombot_build_info": "Version and git revision of this roombot; always 1.",
        "roombot_events_total": "Framework events raised (every line of the event log).",
        "roombot_event_loop_lag_seconds": "How late a 100 ms timer on the event loop fired.",
        "roombot_sessions": "Rooms of this bot by their current reason.",
        "roombot_plugin_calls_total": "Calls into each plugin.",
        "roombot_plugin_failures_total": "Plugin calls that failed or took longer than the plugin's timeoutMs.",
        "roombot_plugin_quarantines_total": "Times each plugin was quarantined.",
        "roomkit_plugin_quarantine_retries_total": "Half-open retries of a quarantined plugin (a reload after its backoff).",
        "roomkit_plugin_log_lines_suppressed_total": "Plugin log lines dropped by the plugin's log rate limit.",
        "roombot_plugin_quarantined": "1 while a plugin is quarantined, else 0.",
        "roombot_plugin_queue_depth": "Calls posted to each plugin and not finished yet.",
        "roombot_plugin_crashes_total": "Crashes of each process-isolated plugin (signal, exit, broken pipe, bad frame).",
        "roombot_plugin_restarts_total": "Restarts of each process-isolated plugin after a crash or a hang.",
        "roombot_plugin_dropped_events_total": "Events dropped for a plugin whose queue was full during a restart.",
        "roombot_plugin_skipped_events_total": "Poison events skipped for a plugin after they crashed it twice.",
        "roomkit_sessions": "Rooms of the engine by their last reported reason.",
        "roomkit_reconnects_total": "Sessions that went RECONNECTING, by how the connection ended.",
        "roomkit_connection_losses_total": "Lost connections to the server, by how they ended.",
        "roomkit_connection_up": "1 while the connection to the server is open and greeted, else 0.",
        "roomkit_kicks_total": "Sessions kicked out, by error code.",
        "roomkit_login_failures_total": "Logins that failed (LOGIN_FAILED), by error code.",
        "roomkit_login_seconds": "Time from LOGINING to LOGINED, per room.",
        "roomkit_resume_seconds": "Time from RECONNECTING to RECONNECTED, per room.",
        "roomkit_url_interrupter_seconds": "Time of one run of the URL-interrupter chain.",
        "roomkit_events_total": "Events raised by the engine, by event-log name.",
        "roomkit_dispatch_seconds": "Time for one event to reach the loop observers (event log, plugin dispatch) and streams.",
        "roomkit_plugin_calls_total": "Calls into each plugin (engine count).",
        "roomkit_plugin_failures_total": "Plugin calls that failed or overran timeoutMs (engine count).",
        "roomkit_plugin_call_seconds": "Time of one plugin call, by plugin and hook.",
        "roomkit_plugin_dispatch_seconds": "Time from the loop turn that raised a room event to the end of each plugin's call for it.",
        "roomkit_event_dispatch_seconds": "Dispatch latency: from the loop turn that received a room event to the end of the last plugin's call for it.",
    ]) { $1 }
}
