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
        /// Its group or others may write it (`mode`, its permission bits), and it was to be
        /// one only its owner can change.
        case writableByOthers(mode: Int)
        /// It belongs to user `owner`, neither this process's user nor root, and it was to be
        /// one only they can change.
        case foreignOwner(owner: UInt32)
    }

    /// The bytes of the regular file at `path`, if it holds fewer than `limit` bytes.
    ///
    /// `guarded`: the file decides whom the process trusts (a certificate authority, keys),
    /// so whoever can change it must be trusted as much: it is refused when its group or
    /// others may write it, or when it belongs to another user than the process's or root.
    /// Judged on the file opened, not on the path.
    package static func read(_ path: String, limit: Int, guarded: Bool = false) -> Result<Data, Refusal> {
        let descriptor = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard descriptor >= 0 else { return .failure(.cannotOpen(reason: String(cString: strerror(errno)))) }
        let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        defer { try? handle.close() }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { return .failure(.cannotRead) }
        guard status.st_mode & S_IFMT == S_IFREG else { return .failure(.notRegular(kind: kind(status.st_mode))) }
        if guarded {
            if Int(status.st_mode) & 0o022 != 0 { return .failure(.writableByOthers(mode: Int(status.st_mode) & 0o7777)) }
            if status.st_uid != geteuid(), status.st_uid != 0 { return .failure(.foreignOwner(owner: UInt32(status.st_uid))) }
        }
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
