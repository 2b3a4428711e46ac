import Hummingbird
import Logging

/// The request the current task serves, for log lines written through loggers that do not
/// carry it: the services log through their environment's logger, made once at start-up.
public enum RequestLogContext {
    /// The id of the request being served (the one in its logger's `hb.request.id`), nil
    /// outside a request.
    @TaskLocal public static var requestID: RequestID?

    /// Adds `hb.request.id` to every line logged while a request is served, so a service's
    /// line (`signed-cards refused certificate chain`) can be matched with the request's. Give
    /// it to the server's log handler (``ServerLogHandler``'s `metadataProvider`); it is read
    /// only for lines actually written.
    public static let metadataProvider = Logger.MetadataProvider {
        guard let id = requestID else { return [:] }
        return ["hb.request.id": .stringConvertible(id)]
    }
}
