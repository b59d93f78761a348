import ArgumentParser
import Foundation

/// An error that is the user's to fix (a flag, a config field): each line
/// is printed on stderr after the program's name, and the program exits 2.
public protocol UsageFailure: Error {
    /// The problems, one per line, each naming its flag, file or field.
    var lines: [String] { get }
}

/// Problems to print one per line before exiting 2.
public struct UsageProblems: UsageFailure {
    /// The problems, one per line.
    public let lines: [String]

    /// `lines`: each names its flag, file or field.
    public init(lines: [String]) {
        self.lines = lines
    }
}

/// The `main` every RoomKit executable shares: parse, run, and turn the
/// outcome into an exit code and at most a few lines on stderr.
public enum CommandMain {
    /// Parses the arguments with `root`, runs the command, and exits:
    /// 0 on success (and for `--help`/`--version`), the code of a thrown
    /// `ExitCode`, 2 with `program: line` for each line of a `UsageFailure`,
    /// and 2 with the first line of ArgumentParser's message otherwise.
    public static func run(_ root: any ParsableCommand.Type) async -> Never {
        do {
            var command = try root.parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
            exit(0)
        } catch {
            fail(root, error)
        }
    }

    /// Prints `error` the RoomKit way and exits with its code.
    private static func fail(_ root: any ParsableCommand.Type, _ error: any Error) -> Never {
        let program = root.configuration.commandName ?? "roomkit"
        switch error {
        case let code as ExitCode:
            exit(code.rawValue)
        case let failure as any UsageFailure:
            for line in failure.lines { FileHandle.standardError.write(Data("\(program): \(line)\n".utf8)) }
            exit(2)
        default:
            if root.exitCode(for: error) == .success {
                print(root.fullMessage(for: error))
                exit(0)
            }
            let message = root.message(for: error).split(separator: "\n").first.map(String.init) ?? "\(error)"
            FileHandle.standardError.write(Data("\(program): \(message)\n".utf8))
            exit(2)
        }
    }
}
