/// A small seeded generator (SplitMix64) so randomized tests are repeatable:
/// print the seed, and a failing run can be replayed with it.
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) {
        state = seed
    }

    /// An independent stream for worker `index` of a run seeded with `seed`
    /// (each worker draws the same values however the threads interleave).
    public init(seed: UInt64, stream index: Int) {
        state = seed ^ (UInt64(index + 1) &* 0xD1B5_4A32_D192_ED03)
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
