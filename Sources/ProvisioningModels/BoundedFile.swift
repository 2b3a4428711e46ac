import Foundation

/// Reads a file a command is given, refusing anything but a regular file and anything over a
/// size limit, without blocking and without loading a file over the limit.
///
/// The file is opened without blocking (a FIFO would otherwise wait for a writer, and the
/// command with it), then sized and read through that descriptor: the size is the file's own,
/// not a symbolic link's, and the bytes read are those of the file sized.
package enum BoundedFile {
    /// Why a file was not read.
    package enum Refusal: Error, Equatable {
        /// It could not be opened (missing, no permission): the system's reason.
        case cannotOpen(reason: String)
        /// It is not a regular file: `kind` says what it is, in a word (`a FIFO`).
        case notRegular(kind: String)
        /// It holds `size` bytes, `limit` or more.
        case tooLarge(size: Int, limit: Int)
        /// Reading it failed.
        case cannotRead
    }

    /// The bytes of the regular file at `path`, if it holds fewer than `limit` bytes.
    package static func read(_ path: String, limit: Int) -> Result<Data, Refusal> {
        let descriptor = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard descriptor >= 0 else { return .failure(.cannotOpen(reason: String(cString: strerror(errno)))) }
        let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        defer { try? handle.close() }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { return .failure(.cannotRead) }
        guard status.st_mode & S_IFMT == S_IFREG else { return .failure(.notRegular(kind: kind(status.st_mode))) }
        let size = Int(status.st_size)
        guard size < limit else { return .failure(.tooLarge(size: size, limit: limit)) }
        do {
            // One byte more than the limit allows, in case the file grew since it was sized.
            let data = try handle.read(upToCount: limit) ?? Data()
            guard data.count < limit else { return .failure(.tooLarge(size: data.count, limit: limit)) }
            return .success(data)
        } catch {
            return .failure(.cannotRead)
        }
    }

    /// What a file that is not a regular file is, in a word.
    private static func kind(_ mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFDIR: "a directory"
        case S_IFIFO: "a FIFO"
        case S_IFSOCK: "a socket"
        case S_IFCHR, S_IFBLK: "a device"
        default: "not a file"
        }
    }
}
