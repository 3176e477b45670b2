package doks

import (
	"time"
)

// SizeUnavailableMessage is the simulator's answer (422
// unprocessable_entity) to a create or resize that needs droplets of a size
// out of stock in the cluster's region: DigitalOcean's droplet API answers
// a size it cannot place with these words; the body DOKS answers for a
// node pool is not documented (docs/limits.md says what the provider
// assumes: any 422 but the droplet limit is "this size here, not now").
const SizeUnavailableMessage = "Size is not available in this region."

// SetOutOfStock makes the size out of stock in the cluster's region for d
// (0 puts it back in stock): creates and resizes that need new droplets of
// it are refused with 422 SizeUnavailableMessage. The Sizes API keeps
// listing it as available, as a catalogue that lags the stock would.
func (s *Server) SetOutOfStock(size string, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.outOfStock == nil {
		s.outOfStock = map[string]time.Time{}
	}
	if d <= 0 {
		delete(s.outOfStock, size)
		return
	}
	s.outOfStock[size] = time.Now().Add(d)
}

// SetSizeAvailable sets the Sizes API's available flag of a size (true by
// default); an unavailable size's creates and resizes are refused too.
func (s *Server) SetSizeAvailable(size string, available bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.notAvailable == nil {
		s.notAvailable = map[string]bool{}
	}
	s.notAvailable[size] = !available
}

// StockRefusals returns how many creates and resizes of the size were
// refused for stock.
func (s *Server) StockRefusals(size string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stockRefusals[size]
}

// refuseForStockLocked says whether n more droplets of size cannot be had
// now, and counts the refusal.
func (s *Server) refuseForStockLocked(size string, n int) bool {
	if n <= 0 {
		return false
	}
	until, out := s.outOfStock[size]
	if !(out && time.Now().Before(until)) && !s.notAvailable[size] {
		return false
	}
	if s.stockRefusals == nil {
		s.stockRefusals = map[string]int{}
	}
	s.stockRefusals[size]++
	return true
}
