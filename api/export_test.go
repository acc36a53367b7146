package api

// ProbeStall is the engine probe's stall window, for the tests that wait
// it out.
const ProbeStall = probeStall
