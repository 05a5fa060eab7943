package travel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// Items is a state snapshot of the application: SSF name -> "table/key" -> JSON value.
type Items map[string]map[string][]byte

// Snapshot reads the current state of every SSF.
func Snapshot(ctx context.Context, runtimes map[string]*ssf.Runtime) (Items, error) {
	out := Items{}
	for name, rt := range runtimes {
		items, err := rt.Items(ctx)
		if err != nil {
			return nil, fmt.Errorf("items of %s: %w", name, err)
		}
		out[name] = items
	}
	return out, nil
}

// Report is what Check found.
type Report struct {
	// Reservations booked at a hotel and on a flight, and orders recorded.
	Booked, Orders int
	// Overbooked counts bookings beyond capacity, summed over every hotel and flight.
	Overbooked int
	// DoubleBooked counts bookings that an item's booked count misses: two reservations that
	// read the same count and took the same room or seat (lost updates).
	DoubleBooked int
	// Unmatched counts reservations booked at a hotel without a flight, or the reverse.
	Unmatched int
	// The violations, by invariant: capacity (overbooked items, counts that disagree with
	// their bookings), pairing (a hotel booking without its flight booking, or the reverse),
	// outcomes (order records and confirmations that disagree with the bookings).
	Capacity, Pairing, Outcomes []error
}

// Err joins every violation; nil if every invariant holds.
func (r *Report) Err() error {
	return errors.Join(slices.Concat(r.Capacity, r.Pairing, r.Outcomes)...)
}

func problem(list *[]error, format string, args ...any) {
	*list = append(*list, fmt.Errorf(format, args...))
}

// Check verifies the application's invariants in a snapshot taken after every request
// finished, and that confirmations (the answers to reserve requests, keyed by reservation id;
// nil if unknown) agree with it:
//
//   - no hotel or flight has more bookings than its capacity, and its booked count equals its
//     bookings (none taken twice) and stays within 0 and the capacity;
//   - a reservation is booked at a hotel if and only if it is booked on a flight;
//   - every booking belongs to an order, every order's record agrees with the bookings (booked:
//     at its hotel and on its flight; refused: on neither), and so does every confirmation.
func Check(it Items, confirmations map[string]Confirmation) Report {
	var r Report
	hotels := r.side(it[Hotel], roomsTable, "hotel", "rooms")
	flights := r.side(it[Flight], seatsTable, "flight", "seats")
	booked := maps.Clone(hotels)
	maps.Copy(booked, flights)
	for _, id := range slices.Sorted(maps.Keys(booked)) {
		h, inHotel := hotels[id]
		f, inFlight := flights[id]
		switch {
		case inHotel && inFlight:
			r.Booked++
		case inHotel:
			r.Unmatched++
			problem(&r.Pairing, "reservation %s: booked at hotel %s without a flight", id, h.Item)
		default:
			r.Unmatched++
			problem(&r.Pairing, "reservation %s: booked on flight %s without a hotel", id, f.Item)
		}
	}
	orders := map[string]Confirmation{}
	for _, k := range slices.Sorted(maps.Keys(it[Order])) {
		table, id, _ := strings.Cut(k, "/")
		if table != ordersTable {
			continue
		}
		var c Confirmation
		if err := json.Unmarshal(it[Order][k], &c); err != nil {
			problem(&r.Outcomes, "order %s: unreadable record %s: %v", id, it[Order][k], err)
			continue
		}
		orders[id] = c
		r.agree("the order's record", c, hotels, flights)
	}
	r.Orders = len(orders)
	for _, id := range slices.Sorted(maps.Keys(booked)) {
		if _, ok := orders[id]; !ok {
			problem(&r.Outcomes, "reservation %s: booked, but no order recorded it", id)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(confirmations)) {
		c := confirmations[id]
		rec, ok := orders[id]
		switch {
		case !ok: // refused before reaching the order (a wrong password)
			r.agree("its confirmation", c, hotels, flights)
		case rec != c:
			problem(&r.Outcomes, "reservation %s: confirmed as %+v, but the order recorded %+v", id, c, rec)
		}
	}
	return r
}

// side checks the stock and bookings of hotel or flight, and returns the bookings by
// reservation id.
func (r *Report) side(items map[string][]byte, stockTable, what, units string) map[string]Booking {
	bookings := map[string]Booking{}
	perItem := map[string]int64{}
	keys := slices.Sorted(maps.Keys(items))
	for _, k := range keys {
		table, id, _ := strings.Cut(k, "/")
		if table != bookingsTable || items[k] == nil {
			continue
		}
		var b Booking
		if err := json.Unmarshal(items[k], &b); err != nil {
			problem(&r.Capacity, "%s booking %s: unreadable %s: %v", what, id, items[k], err)
			continue
		}
		bookings[id] = b
		perItem[b.Item]++
	}
	for _, k := range keys {
		table, item, _ := strings.Cut(k, "/")
		if table != stockTable || items[k] == nil { // nil: locked by a transaction, never written
			continue
		}
		var s Stock
		if err := json.Unmarshal(items[k], &s); err != nil {
			problem(&r.Capacity, "%s %s: unreadable %s %s: %v", what, item, units, items[k], err)
			continue
		}
		n := perItem[item]
		delete(perItem, item)
		if n > s.Capacity {
			r.Overbooked += int(n - s.Capacity)
			problem(&r.Capacity, "%s %s: %d bookings for %d %s (overbooked)", what, item, n, s.Capacity, units)
		}
		switch {
		case n > s.Booked:
			r.DoubleBooked += int(n - s.Booked)
			problem(&r.Capacity, "%s %s: counts %d booked but holds %d bookings (%d taken twice)", what, item, s.Booked, n, n-s.Booked)
		case n < s.Booked:
			problem(&r.Capacity, "%s %s: counts %d booked but holds only %d bookings", what, item, s.Booked, n)
		}
		if s.Booked < 0 || s.Booked > s.Capacity {
			problem(&r.Capacity, "%s %s: booked count %d outside 0..%d", what, item, s.Booked, s.Capacity)
		}
	}
	for _, item := range slices.Sorted(maps.Keys(perItem)) {
		problem(&r.Capacity, "%d bookings of %s %s, which does not exist", perItem[item], what, item)
	}
	return bookings
}

// agree checks that a reservation's outcome, as source says it, matches the bookings.
func (r *Report) agree(source string, c Confirmation, hotels, flights map[string]Booking) {
	h, inHotel := hotels[c.Reservation]
	f, inFlight := flights[c.Reservation]
	switch {
	case c.Booked && (!inHotel || h.Item != c.Hotel || !inFlight || f.Item != c.Flight):
		problem(&r.Outcomes, "reservation %s: %s says hotel %s and flight %s were booked, but the bookings are hotel %q, flight %q",
			c.Reservation, source, c.Hotel, c.Flight, h.Item, f.Item)
	case !c.Booked && (inHotel || inFlight):
		problem(&r.Outcomes, "reservation %s: %s says refused (%s), but it holds bookings: hotel %q, flight %q",
			c.Reservation, source, c.Refused, h.Item, f.Item)
	}
}
