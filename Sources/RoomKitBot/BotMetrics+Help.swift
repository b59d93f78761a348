extension BotMetrics {
    /// `# HELP` text of roombot's metrics (others get their name as help).
    static let help: [String: String] = [
        "roombot_events_total": "Framework events raised (every line of the event log).",
        "roombot_events_per_second": "Framework events per second (since the previous scrape, at most 1 s back).",
        "roombot_event_loop_lag_seconds": "How late a 100 ms timer on the event loop fired.",
        "roombot_sessions": "Room sessions by their current reason.",
        "roombot_plugin_calls_total": "Calls into each plugin.",
        "roombot_plugin_failures_total": "Plugin calls that failed or took longer than the plugin's timeoutMs.",
        "roombot_plugin_latency_seconds": "Mean time of one call into each plugin.",
    ]
}
