package api

// ProbeStall is the engine probe's stall window, for the tests that wait
// it out.
const ProbeStall = probeStall

// ExportsRunning is how many exports are streaming: the tests wait for a
// stalled one to be cut off.
func (s *Server) ExportsRunning() int { return len(s.exports) }
