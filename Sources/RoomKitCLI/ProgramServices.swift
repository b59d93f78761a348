import Foundation
import Logging
import ServiceLifecycle
import UnixSignals

/// How every RoomKit program (roomd, roombot, the example) runs its
/// long-lived parts: one `ServiceGroup`, started in order and stopped in
/// reverse, with SIGTERM and SIGINT as its graceful-shutdown signals.
public enum ProgramServices {
    /// The signals that stop a program gracefully.
    public static let stopSignals: [UnixSignal] = [.sigterm, .sigint]

    /// The program's group: `services` start in this order and stop in
    /// reverse on SIGTERM/SIGINT (or when one of them ends). The group logs
    /// on `logger`; at debug level it names the signal (`signal`) and each
    /// service as it is told to stop and as it finishes (`service`).
    public static func group(_ services: [ServiceGroupConfiguration.ServiceConfiguration], logger: Logger) -> ServiceGroup {
        var configuration = ServiceGroupConfiguration(services: services, gracefulShutdownSignals: stopSignals,
                                                      logger: logger)
        configuration.logging.keys.signalKey = "signal"
        configuration.logging.keys.serviceKey = "service"
        return ServiceGroup(configuration: configuration)
    }
}

/// A program's last service, so the first to stop. It says the program
/// is ready (`ready`: the "listening" line, `READY=1`) once the group runs,
/// that is once the group is trapping SIGTERM and SIGINT: whoever waits for
/// that line may signal at once. When graceful shutdown begins it logs
/// `stopping` (info) and tells systemd (`STOPPING=1`); then the group stops
/// the other services in reverse.
public struct StopAnnouncer: Service {
    let logger: Logger
    let notifier: SystemdNotifier
    let ready: @Sendable () -> Void

    /// Announces on `logger` and through `notifier`; `ready` runs when the group starts.
    public init(logger: Logger, notifier: SystemdNotifier, ready: @escaping @Sendable () -> Void) {
        self.logger = logger
        self.notifier = notifier
        self.ready = ready
    }

    /// Announces readiness, waits for graceful shutdown, then announces it.
    public func run() async throws {
        ready()
        try? await gracefulShutdown()
        logger.info("stopping")
        notifier.stopping()
    }
}
