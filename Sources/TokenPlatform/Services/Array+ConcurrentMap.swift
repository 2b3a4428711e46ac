extension Array where Element: Sendable {
    /// `map` with up to `maximumConcurrency` transforms running at once; the results keep the
    /// order of the elements, whatever order the transforms finish in.
    func concurrentMap<Result: Sendable>(maximumConcurrency: Int, _ transform: @escaping @Sendable (Element) async -> Result) async -> [Result] {
        precondition(maximumConcurrency > 0, "at least one transform must run at a time")
        return await withTaskGroup(of: (Int, Result).self) { group in
            var results = [Result?](repeating: nil, count: count)
            var next = startIndex
            func startNext() {
                guard next < endIndex else { return }
                let (index, element) = (next, self[next])
                group.addTask { (index, await transform(element)) }
                next += 1
            }
            for _ in 0..<Swift.min(maximumConcurrency, count) { startNext() }
            while let (index, result) = await group.next() {
                results[index] = result
                startNext()
            }
            return results.map { $0! }
        }
    }
}
