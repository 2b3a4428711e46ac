/// A command-line failure: printed as one line on stderr, exit status 1, never a stack trace.
struct CLIError: Error, CustomStringConvertible {
    var description: String

    init(_ description: String) {
        self.description = description
    }
}
