import Foundation

// libFuzzer target `flat-json`: the request-body fast path against JSONDecoder, and the
// strict check every request body passes first (StrictJSON).
//
// Compiled into the ProvisioningModels module with its sources (scripts/fuzz.sh), so it
// reaches the package-level reader. For any bytes, the fast path must decline or produce
// exactly what JSONDecoder produces; its base64 decoder must decline or agree with
// Foundation's; and what the strict check accepts, Foundation's JSON parser must read (the
// check is stricter, never looser). A disagreement or a crash stops the run with the input saved.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzFlatJSON(_ bytes: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let data = Data(bytes: bytes, count: count)
    if (try? StrictJSON.check(data)) != nil, (try? JSONSerialization.jsonObject(with: data, options: .fragmentsAllowed)) == nil {
        fatalError("the strict check accepts what Foundation cannot parse: \(data.base64EncodedString())")
    }
    check(SignedCardRequest.self, data)
    check(TokenSearchRequest.self, data)
    // The base64 decoder reads a JSON string's contents whose only escape is `\/` (the reader
    // checked that): given such text, it declines or agrees with Foundation on the unescaped text.
    let text = UnsafeBufferPointer(start: bytes, count: count)
    let backslash = UInt8(ascii: "\\"), slash = UInt8(ascii: "/")
    var unescaped: [UInt8] = []
    var index = 0
    while index < count {
        if text[index] == backslash {
            guard index + 1 < count, text[index + 1] == slash else { return 0 }
            index += 1
        }
        unescaped.append(text[index])
        index += 1
    }
    if let fast = FlatJSONReader.decodeBase64(text) {
        guard let foundation = Data(base64Encoded: Data(unescaped)), foundation == fast else {
            fatalError("base64 fast path disagrees with Foundation on \(data.base64EncodedString())")
        }
    }
    return 0
}

private func check<T: FlatJSONDecodable & Equatable>(_ type: T.Type, _ data: Data) {
    guard let fast = T.decodeFlat(data) else { return }
    guard let slow = try? JSONDecoder().decode(T.self, from: data), slow == fast else {
        fatalError("\(T.self): fast path disagrees with JSONDecoder on \(data.base64EncodedString())")
    }
}
