package k3

// MLACacheBytes lets the external tests see how much a session's MLA caches hold.
func MLACacheBytes(s *Session) int64 { return s.mlaCacheBytes() }
