import Foundation
import RoomKitTestSupport
import XCTest

/// The alert rules and the Grafana dashboard of `deploy/`: the rules pass
/// `promtool check rules` and their own `promtool test rules` unit tests
/// (deploy/prometheus/roomkit.rules.test.yml), the dashboard parses, and
/// every metric family either names is one docs/CLI.md lists (the list
/// `MetricsDocsTests` holds to a real scrape). promtool comes with
/// `make bootstrap` (Debian's prometheus package).
final class DeployRulesTests: XCTestCase {
    private let rules = repositoryRoot + "/deploy/prometheus/roomkit.rules.yml"
    private let ruleTests = repositoryRoot + "/deploy/prometheus/roomkit.rules.test.yml"
    private let dashboard = repositoryRoot + "/deploy/grafana/roomkit.json"

    private func promtool() throws {
        guard let which = runTool(["sh", "-c", "command -v promtool"]), which.status == 0 else {
            throw XCTSkip("promtool is not installed: run `make bootstrap` (it installs Debian's prometheus package, without starting it)")
        }
    }

    func testAlertRules_passPromtoolCheckRules() throws {
        try promtool()
        let check = try XCTUnwrap(runTool(["promtool", "check", "rules", rules]))
        XCTAssertEqual(check.status, 0, check.stdout + check.stderr)
        XCTAssertTrue(check.stdout.contains("SUCCESS"), check.stdout)
    }

    func testAlertRules_passTheirUnitTests() throws {
        try promtool()
        let test = try XCTUnwrap(runTool(["promtool", "test", "rules", ruleTests]))
        XCTAssertEqual(test.status, 0, test.stdout + test.stderr)
    }

    func testAlertRules_coverEveryAlertTheIssueAsksFor_eachUnitTested() throws {
        let text = try String(contentsOfFile: rules, encoding: .utf8)
        let tests = try String(contentsOfFile: ruleTests, encoding: .utf8)
        for alert in ["RoomdDown", "RoombotConnectionDown", "RoombotRoomsNotLogined", "RoombotPluginQuarantined",
                      "RoombotPluginCrashLooping", "FleetUnhomedRooms", "FleetLeaseLost", "RoombotDispatchLatencyHigh",
                      "RoomdCommitFailure", "FleetRedisDown"] {
            XCTAssertTrue(text.contains("- alert: \(alert)\n"), "no rule \(alert)")
            XCTAssertTrue(tests.contains("alertname: \(alert)\n"), "no unit test of \(alert)")
        }
    }

    func testDashboard_parses_andEveryExpressionNamesDocumentedFamilies() throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: dashboard))
        let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let panels = try XCTUnwrap(object["panels"] as? [[String: Any]])
        let expressions = panels.flatMap { ($0["targets"] as? [[String: Any]] ?? []).compactMap { $0["expr"] as? String } }
        XCTAssertGreaterThan(expressions.count, 30)
        let documented = try documentedFamilies()
        var named: Set<String> = []
        for expression in expressions { named.formUnion(families(in: expression)) }
        for family in ["roomd_", "roombot_", "roomkit_", "roombot_fleet_"] {
            XCTAssertTrue(named.contains { $0.hasPrefix(family) }, "the dashboard has no \(family)* panel")
        }
        XCTAssertEqual(named.subtracting(documented).subtracting(["up"]), [], "dashboard expressions name undocumented families")
        let ruleText = try String(contentsOfFile: rules, encoding: .utf8)
        let ruleFamilies = ruleText.split(separator: "\n").filter { $0.contains("expr:") }.reduce(into: Set<String>()) {
            $0.formUnion(families(in: String($1)))
        }
        XCTAssertEqual(ruleFamilies.subtracting(documented).subtracting(["up"]), [], "alert rules name undocumented families")
    }

    /// Metric family names in a PromQL expression (histogram suffixes removed).
    private func families(in expression: String) -> Set<String> {
        let pattern = try! NSRegularExpression(pattern: #"\b(up|(?:roomd|roombot|roomkit|process)_[a-z0-9_]+)\b"#)
        let range = NSRange(expression.startIndex..., in: expression)
        return Set(pattern.matches(in: expression, range: range).compactMap { match -> String? in
            guard let found = Range(match.range(at: 1), in: expression) else { return nil }
            return stripHistogramSuffix(String(expression[found]))
        })
    }
}

/// `name` without a histogram series suffix (`_bucket`, `_sum`, `_count`).
func stripHistogramSuffix(_ name: String) -> String {
    for suffix in ["_bucket", "_sum", "_count"] where name.hasSuffix(suffix) {
        return String(name.dropLast(suffix.count))
    }
    return name
}

/// Every family name docs/CLI.md's "Metrics" section lists (in backticks;
/// `process_*` stands for the six process metrics).
func documentedFamilies() throws -> Set<String> {
    let cli = try String(contentsOfFile: repositoryRoot + "/docs/CLI.md", encoding: .utf8)
    guard let start = cli.range(of: "\n## Metrics\n") else { throw XCTSkip("docs/CLI.md has no Metrics section") }
    let section = cli[start.upperBound...].components(separatedBy: "\n## ").first ?? ""
    let pattern = try NSRegularExpression(pattern: #"`((?:roomd|roombot|roomkit|process)_[a-z0-9_]+)"#)
    let range = NSRange(section.startIndex..., in: section)
    return Set(pattern.matches(in: section, range: range).compactMap { match -> String? in
        Range(match.range(at: 1), in: section).map { String(section[$0]) }
    })
}
