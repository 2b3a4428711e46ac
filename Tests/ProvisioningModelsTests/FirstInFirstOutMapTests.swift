import ProvisioningModels
import Testing

@Suite("First-in-first-out map")
struct FirstInFirstOutMapTests {
    @Test func whenFullTheEntryInsertedFirstIsForgottenAndAReplacementKeepsItsPlace() {
        var map = FirstInFirstOutMap<String, Int>(capacity: 2)
        map.insert(1, for: "a")
        map.insert(2, for: "b")
        // Replacing a's value does not move it to the back.
        map.insert(10, for: "a")
        map.insert(3, for: "c")
        #expect(map["a"] == nil && map["b"] == 2 && map["c"] == 3)
        #expect(map.count == 2)
        map.insert(4, for: "d")
        #expect(map["b"] == nil && map["c"] == 3 && map["d"] == 4)
    }

    @Test func aMapOfNoCapacityKeepsNothingAndOneEmptiedStartsAfresh() {
        var none = FirstInFirstOutMap<String, Int>(capacity: 0)
        none.insert(1, for: "a")
        #expect(none["a"] == nil && none.count == 0)
        var map = FirstInFirstOutMap<String, Int>(capacity: 2)
        map.insert(1, for: "a")
        map.insert(2, for: "b")
        map.removeAll()
        #expect(map.count == 0 && map["a"] == nil)
        map.insert(3, for: "c")
        map.insert(4, for: "d")
        map.insert(5, for: "e")
        #expect(map["c"] == nil && map["d"] == 4 && map["e"] == 5)
    }
}
