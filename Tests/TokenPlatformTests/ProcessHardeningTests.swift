import Testing
@testable import TokenPlatform

/// What `serve --production` does besides turning core files off (which `pushprov serve`'s
/// own test checks on the real binary): tried on the test process itself, harmless there (it
/// loses core files, and other processes of its user, root aside, can no longer attach to it;
/// programs it starts are dumpable again, since `execve` resets the flag). Core files are not
/// turned off here: the limit would pass to every server the tests start, and their check
/// could no longer fail.
@Suite("Process hardening")
struct ProcessHardeningTests {
    #if os(Linux)
    @Test func inProductionTheProcessIsMarkedNotDumpable() throws {
        #expect(ProcessHardening.markNotDumpable() == nil)
        #expect(ProcessHardening.isDumpable() == false)
    }
    #endif
}
