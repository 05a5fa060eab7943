// Package travel is Beldi's travel reservation application (OSDI '20, §7.4: DeathStarBench's
// hotel reservation, extended with flights) on ssfkit. Ten SSFs, each owning its own store:
//
//	frontend   the entry point: routes search, recommend, login and reserve requests
//	user       accounts; checks logins
//	search     hotels near a point, filtered by price and star rate: calls geo, then rate
//	geo        hotel locations; the hotels nearest to a point
//	rate       each hotel's nightly price and star rate
//	profile    each hotel's name, address and description
//	recommend  the best hotels by distance, rate or price
//	hotel      rooms per hotel, and the hotel bookings
//	flight     seats per flight, and the flight bookings
//	order      a reservation: a room and a seat, booked in one cross-SSF transaction
//
// The reservation is the point of the example, and it runs in one of three modes (Mode), so
// that the benchmark can compare them. In ModeTransaction the order begins a transaction and
// calls hotel, then flight; each reads the item's count, checks it and writes it back with a
// booking record. Inside the transaction every read locks its item (wait-die two-phase
// locking), so that plain read-check-write is safe, and EndTx commits both bookings or neither.
// ModeExactlyOnce makes the same calls without a transaction: each count is updated with a
// compare-and-swap (CondWrite), so no item is overbooked, but a flight found full after the
// hotel was booked leaves the hotel booking without its flight. ModeUnsafe uses the
// transaction mode's plain read-check-write without the transaction: concurrent reservations
// read the same count and both take the last room (it double-books), besides leaving unmatched
// bookings. Raw runs that unsafe code without ssfkit at all, as Beldi's baseline.
package travel

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// SSF names.
const (
	Frontend  = "frontend"
	User      = "user"
	Search    = "search"
	Geo       = "geo"
	Rate      = "rate"
	Profile   = "profile"
	Recommend = "recommend"
	Hotel     = "hotel"
	Flight    = "flight"
	Order     = "order"
)

// Tables of each SSF (an SSF's tables are partitions of its one store).
const (
	usersTable    = "users"    // user: name -> Account (password hash)
	pointsTable   = "points"   // geo: "all" -> []Point
	plansTable    = "plans"    // rate: hotel -> Plan
	profilesTable = "profiles" // profile: hotel -> HotelProfile
	catalogTable  = "catalog"  // recommend: "all" -> []Listing
	roomsTable    = "rooms"    // hotel: hotel -> Stock
	seatsTable    = "seats"    // flight: flight -> Stock
	bookingsTable = "bookings" // hotel, flight: reservation id -> Booking
	ordersTable   = "orders"   // order: reservation id -> Confirmation
	allKey        = "all"
)

// tables lists the tables of each SSF.
var tables = map[string][]string{
	Frontend: nil, User: {usersTable}, Search: nil, Geo: {pointsTable}, Rate: {plansTable},
	Profile: {profilesTable}, Recommend: {catalogTable}, Hotel: {roomsTable, bookingsTable},
	Flight: {seatsTable, bookingsTable}, Order: {ordersTable},
}

// Mode is how a reservation books its room and seat.
type Mode string

// Reservation modes.
const (
	// ModeTransaction books both in one transaction: all or nothing, never overbooked.
	ModeTransaction Mode = "transaction"
	// ModeExactlyOnce books the room, then the seat, each with a compare-and-swap: never
	// overbooked, but a full flight leaves the hotel booked without it.
	ModeExactlyOnce Mode = "exactly-once"
	// ModeUnsafe books with plain reads and writes and no transaction: it double-books under
	// concurrency and leaves unmatched bookings.
	ModeUnsafe Mode = "unsafe"
)

// Modes lists the reservation modes, safest first.
var Modes = []Mode{ModeTransaction, ModeExactlyOnce, ModeUnsafe}

func (m Mode) valid() bool { return slices.Contains(Modes, m) }

// Frontend operations.
const (
	OpSearch    = "search"
	OpRecommend = "recommend"
	OpLogin     = "login"
	OpReserve   = "reserve"
)

// Request is the frontend's input; Op says which fields matter.
type Request struct {
	Op string `json:"op"`
	// login and reserve
	User     string `json:"user,omitempty"`
	Password string `json:"password,omitempty"`
	// reserve; the reservation's id is the request's instance id
	Hotel  string `json:"hotel,omitempty"`
	Flight string `json:"flight,omitempty"`
	Mode   Mode   `json:"mode,omitempty"` // default ModeTransaction
	// search and recommend
	Lat      float64 `json:"lat,omitempty"`
	Lon      float64 `json:"lon,omitempty"`
	MaxPrice int64   `json:"max_price,omitempty"` // search: 0 means any
	MinRate  float64 `json:"min_rate,omitempty"`  // search: 0 means any
	By       string  `json:"by,omitempty"`        // recommend: distance, rate or price
	Limit    int     `json:"limit,omitempty"`     // how many hotels to return (default 5)
}

// Recommendation criteria.
const (
	ByDistance = "distance"
	ByRate     = "rate"
	ByPrice    = "price"
)

const (
	defaultLimit = 5
	maxLimit     = 100
	// searchRadiusKm and maxNearby bound what geo returns: the candidates search filters.
	searchRadiusKm = 10
	maxNearby      = 20
	// maxTxAttempts bounds how often a reservation retries a transaction that wait-die aborted
	// before giving up (RefusedContention); txBackoff and maxTxBackoff space the retries, so
	// the older transaction holding the lock can finish.
	maxTxAttempts = 16
	txBackoff     = 2 * time.Millisecond
	maxTxBackoff  = 50 * time.Millisecond
)

// Point is a hotel's location.
type Point struct {
	Hotel string  `json:"hotel"`
	Lat   float64 `json:"lat"`
	Lon   float64 `json:"lon"`
}

// Plan is a hotel's nightly price (in dollars) and star rate.
type Plan struct {
	Hotel string  `json:"hotel"`
	Price int64   `json:"price"`
	Rate  float64 `json:"rate"`
}

// HotelProfile describes a hotel.
type HotelProfile struct {
	Hotel       string `json:"hotel"`
	Name        string `json:"name"`
	Address     string `json:"address"`
	Description string `json:"description"`
}

// Listing is what recommend keeps per hotel: location, price and rate.
type Listing struct {
	Point
	Price int64   `json:"price"`
	Rate  float64 `json:"rate"`
}

// Hit is a search result: a hotel, how far it is, its price and rate.
type Hit struct {
	Hotel string  `json:"hotel"`
	Km    float64 `json:"km"`
	Price int64   `json:"price"`
	Rate  float64 `json:"rate"`
}

// Found is a search result as the frontend returns it, with the hotel's profile.
type Found struct {
	Hit
	Profile HotelProfile `json:"profile"`
}

// Account is a user's stored credentials.
type Account struct {
	PasswordSHA256 string `json:"password_sha256"`
}

// Stock is a hotel's rooms or a flight's seats.
type Stock struct {
	Capacity int64 `json:"capacity"`
	Booked   int64 `json:"booked"`
}

// Booking is a hotel's or a flight's record of one reservation, keyed by its id.
type Booking struct {
	Item string `json:"item"` // the hotel or flight
	User string `json:"user"`
}

// Reservation is the order SSF's input.
type Reservation struct {
	ID     string `json:"id"`
	User   string `json:"user"`
	Hotel  string `json:"hotel"`
	Flight string `json:"flight"`
	Mode   Mode   `json:"mode"`
}

// Why a reservation was refused.
const (
	RefusedLogin      = "login"       // wrong user or password; nothing was tried
	RefusedHotelFull  = "hotel-full"  // no room left
	RefusedFlightFull = "flight-full" // no seat left
	// RefusedContention: every one of maxTxAttempts transactions was aborted by wait-die.
	RefusedContention = "contention"
)

// Confirmation is a reservation's outcome: the frontend's answer to a reserve request, and the
// order SSF's record of it.
type Confirmation struct {
	Reservation string `json:"reservation"`
	User        string `json:"user"`
	Hotel       string `json:"hotel"`
	Flight      string `json:"flight"`
	Mode        Mode   `json:"mode"`
	Booked      bool   `json:"booked"`
	Refused     string `json:"refused,omitempty"` // why not, when not booked
	// Attempts is how many transactions it took (ModeTransaction; 1 + wait-die retries).
	Attempts int `json:"attempts,omitempty"`
}

// Env is what the travel SSFs need from their platform. *ssf.Env implements it; so does Raw's
// environment, which runs the same code without ssfkit. What only ssfkit provides
// (conditional writes, transactions) is reached through exactlyOnce.
type Env interface {
	InstanceID() string
	ReadInto(table, key string, dst any) (found bool, err error)
	Write(table, key string, value any) error
	SyncInvoke(callee string, input any) (json.RawMessage, error)
}

// handler is an SSF's code, on any Env.
type handler func(env Env, input json.RawMessage) (any, error)

func handlers() map[string]handler {
	return map[string]handler{
		Frontend: frontend, User: user, Search: search, Geo: geo, Rate: rate, Profile: profile,
		Recommend: recommend, Hotel: inventory{table: roomsTable, what: "hotel"}.handle,
		Flight: inventory{table: seatsTable, what: "flight"}.handle, Order: order,
	}
}

// Handlers returns the application's SSF handlers by name.
func Handlers() map[string]ssf.Handler {
	out := map[string]ssf.Handler{}
	for name, h := range handlers() {
		out[name] = func(env *ssf.Env, input json.RawMessage) (any, error) { return h(env, input) }
	}
	return out
}

// exactlyOnce returns the ssfkit Env behind env, for what mode needs that only ssfkit has.
func exactlyOnce(env Env, mode Mode) (*ssf.Env, error) {
	e, ok := env.(*ssf.Env)
	if !ok {
		return nil, fmt.Errorf("mode %s needs the ssfkit runtime; without it only %s runs", mode, ModeUnsafe)
	}
	return e, nil
}

// call invokes callee and decodes its output into a T.
func call[T any](env Env, callee string, input any) (T, error) {
	var out T
	raw, err := env.SyncInvoke(callee, input)
	if err != nil {
		return out, err
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return out, fmt.Errorf("%s answered %s, which does not decode into %T: %v", callee, raw, out, err)
	}
	return out, nil
}

func decode(what string, input json.RawMessage, dst any) error {
	if err := json.Unmarshal(input, dst); err != nil {
		return fmt.Errorf("malformed %s %s: %v", what, input, err)
	}
	return nil
}

func limit(n int) int {
	if n <= 0 {
		return defaultLimit
	}
	return min(n, maxLimit)
}

func frontend(env Env, input json.RawMessage) (any, error) {
	var req Request
	if err := decode("request", input, &req); err != nil {
		return nil, err
	}
	switch req.Op {
	case OpLogin:
		return call[bool](env, User, userOp{Op: "login", User: req.User, Password: req.Password})
	case OpSearch:
		hits, err := call[[]Hit](env, Search, query{Lat: req.Lat, Lon: req.Lon, MaxPrice: req.MaxPrice, MinRate: req.MinRate, Limit: req.Limit})
		if err != nil {
			return nil, err
		}
		profiles, err := profilesOf(env, hits, func(h Hit) string { return h.Hotel })
		if err != nil {
			return nil, err
		}
		found := make([]Found, len(hits))
		for i, h := range hits {
			found[i] = Found{Hit: h, Profile: profiles[i]}
		}
		return found, nil
	case OpRecommend:
		ids, err := call[[]string](env, Recommend, recommendOp{By: req.By, Lat: req.Lat, Lon: req.Lon, Limit: req.Limit})
		if err != nil {
			return nil, err
		}
		return profilesOf(env, ids, func(id string) string { return id })
	case OpReserve:
		mode := req.Mode
		if mode == "" {
			mode = ModeTransaction
		}
		r := Reservation{ID: env.InstanceID(), User: req.User, Hotel: req.Hotel, Flight: req.Flight, Mode: mode}
		if err := r.validate(); err != nil {
			return nil, err
		}
		ok, err := call[bool](env, User, userOp{Op: "login", User: req.User, Password: req.Password})
		if err != nil {
			return nil, err
		}
		if !ok {
			return r.refused(RefusedLogin, 0), nil
		}
		return call[Confirmation](env, Order, r)
	}
	return nil, fmt.Errorf("unknown operation %q (want %s, %s, %s or %s)", req.Op, OpSearch, OpRecommend, OpLogin, OpReserve)
}

// profilesOf returns the profiles of the hotels of xs, in the same order.
func profilesOf[X any](env Env, xs []X, hotel func(X) string) ([]HotelProfile, error) {
	ids := make([]string, len(xs))
	for i, x := range xs {
		ids[i] = hotel(x)
	}
	return call[[]HotelProfile](env, Profile, profileOp{Op: "get", Hotels: ids})
}

type userOp struct {
	Op       string             `json:"op"` // login, load
	User     string             `json:"user,omitempty"`
	Password string             `json:"password,omitempty"`
	Accounts map[string]Account `json:"accounts,omitempty"` // load
}

// PasswordHash is how user stores a password.
func PasswordHash(password string) string {
	sum := sha256.Sum256([]byte(password))
	return hex.EncodeToString(sum[:])
}

func user(env Env, input json.RawMessage) (any, error) {
	var op userOp
	if err := decode("user operation", input, &op); err != nil {
		return nil, err
	}
	switch op.Op {
	case "load":
		return nil, load(env, usersTable, op.Accounts)
	case "login":
		var a Account
		found, err := env.ReadInto(usersTable, op.User, &a)
		return found && a.PasswordSHA256 == PasswordHash(op.Password), err
	}
	return nil, fmt.Errorf("unknown user operation %q", op.Op)
}

// load writes seed records, one item each, in key order so that executions are deterministic.
func load[V any](env Env, table string, records map[string]V) error {
	for _, k := range slices.Sorted(maps.Keys(records)) {
		if err := env.Write(table, k, records[k]); err != nil {
			return err
		}
	}
	return nil
}

type query struct {
	Lat      float64 `json:"lat"`
	Lon      float64 `json:"lon"`
	MaxPrice int64   `json:"max_price,omitempty"`
	MinRate  float64 `json:"min_rate,omitempty"`
	Limit    int     `json:"limit,omitempty"`
}

// search returns the hotels within searchRadiusKm of a point that match the price and rate
// filters, nearest first.
func search(env Env, input json.RawMessage) (any, error) {
	var q query
	if err := decode("query", input, &q); err != nil {
		return nil, err
	}
	near, err := call[[]Hit](env, Geo, geoOp{Op: "nearby", Lat: q.Lat, Lon: q.Lon})
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(near))
	for i, h := range near {
		ids[i] = h.Hotel
	}
	plans, err := call[[]Plan](env, Rate, rateOp{Op: "get", Hotels: ids})
	if err != nil {
		return nil, err
	}
	byHotel := map[string]Plan{}
	for _, p := range plans {
		byHotel[p.Hotel] = p
	}
	hits := []Hit{}
	for _, h := range near {
		p, ok := byHotel[h.Hotel]
		if !ok || (q.MaxPrice > 0 && p.Price > q.MaxPrice) || p.Rate < q.MinRate {
			continue
		}
		h.Price, h.Rate = p.Price, p.Rate
		if hits = append(hits, h); len(hits) == limit(q.Limit) {
			break
		}
	}
	return hits, nil
}

type geoOp struct {
	Op     string  `json:"op"` // nearby, load
	Lat    float64 `json:"lat,omitempty"`
	Lon    float64 `json:"lon,omitempty"`
	Points []Point `json:"points,omitempty"` // load
}

// geo keeps every hotel's location in one item, the index DeathStarBench's geo service builds
// in memory, and answers with the hotels within searchRadiusKm, nearest first.
func geo(env Env, input json.RawMessage) (any, error) {
	var op geoOp
	if err := decode("geo operation", input, &op); err != nil {
		return nil, err
	}
	switch op.Op {
	case "load":
		return nil, env.Write(pointsTable, allKey, op.Points)
	case "nearby":
		var points []Point
		if _, err := env.ReadInto(pointsTable, allKey, &points); err != nil {
			return nil, err
		}
		near := []Hit{}
		for _, p := range points {
			if km := distanceKm(op.Lat, op.Lon, p.Lat, p.Lon); km <= searchRadiusKm {
				near = append(near, Hit{Hotel: p.Hotel, Km: km})
			}
		}
		slices.SortFunc(near, func(a, b Hit) int { return byScoreThenID(a.Km, b.Km, a.Hotel, b.Hotel) })
		return near[:min(len(near), maxNearby)], nil
	}
	return nil, fmt.Errorf("unknown geo operation %q", op.Op)
}

// distanceKm is the great-circle distance between two points (haversine).
func distanceKm(lat1, lon1, lat2, lon2 float64) float64 {
	const earthKm = 6371
	rad := math.Pi / 180
	dLat, dLon := (lat2-lat1)*rad, (lon2-lon1)*rad
	a := math.Sin(dLat/2)*math.Sin(dLat/2) + math.Cos(lat1*rad)*math.Cos(lat2*rad)*math.Sin(dLon/2)*math.Sin(dLon/2)
	return 2 * earthKm * math.Asin(math.Sqrt(a))
}

// byScoreThenID orders by score, then by id, so that ties have one order.
func byScoreThenID(a, b float64, idA, idB string) int {
	return cmp.Or(cmp.Compare(a, b), strings.Compare(idA, idB))
}

type rateOp struct {
	Op     string          `json:"op"` // get, load
	Hotels []string        `json:"hotels,omitempty"`
	Plans  map[string]Plan `json:"plans,omitempty"` // load
}

func rate(env Env, input json.RawMessage) (any, error) {
	var op rateOp
	if err := decode("rate operation", input, &op); err != nil {
		return nil, err
	}
	switch op.Op {
	case "load":
		return nil, load(env, plansTable, op.Plans)
	case "get":
		return readEach[Plan](env, plansTable, op.Hotels)
	}
	return nil, fmt.Errorf("unknown rate operation %q", op.Op)
}

// readEach reads the items of keys that exist, in order.
func readEach[V any](env Env, table string, keys []string) ([]V, error) {
	out := []V{}
	for _, k := range keys {
		var v V
		found, err := env.ReadInto(table, k, &v)
		if err != nil {
			return nil, err
		}
		if found {
			out = append(out, v)
		}
	}
	return out, nil
}

type profileOp struct {
	Op       string                  `json:"op"` // get, load
	Hotels   []string                `json:"hotels,omitempty"`
	Profiles map[string]HotelProfile `json:"profiles,omitempty"` // load
}

func profile(env Env, input json.RawMessage) (any, error) {
	var op profileOp
	if err := decode("profile operation", input, &op); err != nil {
		return nil, err
	}
	switch op.Op {
	case "load":
		return nil, load(env, profilesTable, op.Profiles)
	case "get":
		profiles, err := readEach[HotelProfile](env, profilesTable, op.Hotels)
		if err == nil && len(profiles) != len(op.Hotels) {
			err = fmt.Errorf("%d of the hotels %v have no profile", len(op.Hotels)-len(profiles), op.Hotels)
		}
		return profiles, err
	}
	return nil, fmt.Errorf("unknown profile operation %q", op.Op)
}

type recommendOp struct {
	Op      string    `json:"op,omitempty"` // load, or empty to recommend
	By      string    `json:"by,omitempty"`
	Lat     float64   `json:"lat,omitempty"`
	Lon     float64   `json:"lon,omitempty"`
	Limit   int       `json:"limit,omitempty"`
	Catalog []Listing `json:"catalog,omitempty"` // load
}

// recommend returns the ids of the best hotels: nearest, best rated or cheapest.
func recommend(env Env, input json.RawMessage) (any, error) {
	var op recommendOp
	if err := decode("recommendation request", input, &op); err != nil {
		return nil, err
	}
	if op.Op == "load" {
		return nil, env.Write(catalogTable, allKey, op.Catalog)
	}
	var score func(Listing) float64 // lower is better
	switch op.By {
	case ByDistance:
		score = func(l Listing) float64 { return distanceKm(op.Lat, op.Lon, l.Lat, l.Lon) }
	case ByRate:
		score = func(l Listing) float64 { return -l.Rate }
	case ByPrice:
		score = func(l Listing) float64 { return float64(l.Price) }
	default:
		return nil, fmt.Errorf("unknown recommendation criterion %q (want %s, %s or %s)", op.By, ByDistance, ByRate, ByPrice)
	}
	var catalog []Listing
	if _, err := env.ReadInto(catalogTable, allKey, &catalog); err != nil {
		return nil, err
	}
	slices.SortFunc(catalog, func(a, b Listing) int { return byScoreThenID(score(a), score(b), a.Hotel, b.Hotel) })
	ids := []string{}
	for _, l := range catalog[:min(len(catalog), limit(op.Limit))] {
		ids = append(ids, l.Hotel)
	}
	return ids, nil
}

// inventoryOp is the input of hotel and flight.
type inventoryOp struct {
	Op string `json:"op"` // reserve, load
	// reserve
	Item        string `json:"item,omitempty"`
	Reservation string `json:"reservation,omitempty"`
	User        string `json:"user,omitempty"`
	Mode        Mode   `json:"mode,omitempty"`
	// load: capacity per item
	Capacity map[string]int64 `json:"capacity,omitempty"`
}

// inventory is the code of hotel (rooms) and flight (seats): items with a capacity, and a
// booking record per reservation.
type inventory struct {
	table string // rooms or seats
	what  string // hotel or flight, for errors
}

func (inv inventory) handle(env Env, input json.RawMessage) (any, error) {
	var op inventoryOp
	if err := decode(inv.what+" operation", input, &op); err != nil {
		return nil, err
	}
	switch op.Op {
	case "load":
		stock := map[string]Stock{}
		for id, c := range op.Capacity {
			stock[id] = Stock{Capacity: c}
		}
		return nil, load(env, inv.table, stock)
	case "reserve":
		return inv.reserve(env, op)
	}
	return nil, fmt.Errorf("unknown %s operation %q", inv.what, op.Op)
}

// reserve takes one unit of the item for the reservation and records the booking; it reports
// false, changing nothing, if the item is full.
func (inv inventory) reserve(env Env, op inventoryOp) (bool, error) {
	var took bool
	var err error
	switch op.Mode {
	case ModeTransaction:
		// The read locks the item until the transaction ends, so nothing changes it between
		// the check and the write; outside the order's transaction nothing would stop that.
		var e *ssf.Env
		if e, err = exactlyOnce(env, op.Mode); err == nil && !e.InTx() {
			err = fmt.Errorf("%s: a reservation in mode %s must come from the order's transaction", inv.what, op.Mode)
		}
		if err == nil {
			took, err = inv.take(env, op.Item)
		}
	case ModeExactlyOnce:
		took, err = inv.takeCAS(env, op.Item)
	case ModeUnsafe:
		took, err = inv.take(env, op.Item)
	default:
		err = fmt.Errorf("unknown reservation mode %q (want one of %v)", op.Mode, Modes)
	}
	if err != nil || !took {
		return false, err
	}
	return true, env.Write(bookingsTable, op.Reservation, Booking{Item: op.Item, User: op.User})
}

// take takes one unit with a plain read, check and write: safe only under the item's lock.
func (inv inventory) take(env Env, item string) (bool, error) {
	s, err := inv.stock(env, item)
	if err != nil || s.Booked >= s.Capacity {
		return false, err
	}
	s.Booked++
	return true, env.Write(inv.table, item, s)
}

// takeCAS takes one unit with a compare-and-swap loop: each attempt writes only if the count is
// still the one it read, so concurrent reservations never take the same unit.
func (inv inventory) takeCAS(env Env, item string) (bool, error) {
	e, err := exactlyOnce(env, ModeExactlyOnce)
	if err != nil {
		return false, err
	}
	for {
		s, err := inv.stock(e, item)
		if err != nil || s.Booked >= s.Capacity {
			return false, err
		}
		next := Stock{Capacity: s.Capacity, Booked: s.Booked + 1}
		if ok, err := e.CondWrite(inv.table, item, next, store.Equal(store.Attr("booked"), s.Booked)); err != nil || ok {
			return ok, err
		}
	}
}

func (inv inventory) stock(env Env, item string) (Stock, error) {
	var s Stock
	found, err := env.ReadInto(inv.table, item, &s)
	if err == nil && !found {
		err = fmt.Errorf("no %s %q", inv.what, item)
	}
	return s, err
}

func (r Reservation) validate() error {
	if r.ID == "" || r.User == "" || r.Hotel == "" || r.Flight == "" {
		return fmt.Errorf("a reservation needs an id, a user, a hotel and a flight, got %+v", r)
	}
	if !r.Mode.valid() {
		return fmt.Errorf("unknown reservation mode %q (want one of %v)", r.Mode, Modes)
	}
	return nil
}

func (r Reservation) confirmation(booked bool, refused string, attempts int) Confirmation {
	return Confirmation{Reservation: r.ID, User: r.User, Hotel: r.Hotel, Flight: r.Flight, Mode: r.Mode,
		Booked: booked, Refused: refused, Attempts: attempts}
}

func (r Reservation) refused(why string, attempts int) Confirmation {
	return r.confirmation(false, why, attempts)
}

// orderInput is the order SSF's input: a reservation to make, or (Record) the outcome of one
// another coordinator made, to record (ReserveWorkflow).
type orderInput struct {
	Reservation
	Record *Confirmation `json:"record,omitempty"`
}

// order books a hotel room and a flight seat for a reservation, and records the outcome.
func order(env Env, input json.RawMessage) (any, error) {
	var in orderInput
	if err := decode("reservation", input, &in); err != nil {
		return nil, err
	}
	if c := in.Record; c != nil {
		if c.Reservation == "" {
			return nil, errors.New("a recorded confirmation needs its reservation id")
		}
		return *c, env.Write(ordersTable, c.Reservation, *c)
	}
	r := in.Reservation
	if err := r.validate(); err != nil {
		return nil, err
	}
	var c Confirmation
	var err error
	if r.Mode == ModeTransaction {
		var e *ssf.Env
		if e, err = exactlyOnce(env, r.Mode); err == nil {
			c, err = reserveInTx(e, r)
		}
	} else {
		c, err = reserveWithoutTx(env, r)
	}
	if err != nil {
		return nil, err
	}
	return c, env.Write(ordersTable, r.ID, c)
}

// reserveInTx books both in one transaction. A transaction aborted by wait-die (it met the lock
// of an older one) is retried in a new transaction after a pause, at most maxTxAttempts times;
// one aborted because the hotel or the flight is full is not.
func reserveInTx(env *ssf.Env, r Reservation) (Confirmation, error) {
	for attempt := 1; ; attempt++ {
		if err := env.BeginTx(); err != nil {
			return Confirmation{}, err
		}
		full, err := bookBoth(env, r)
		failed := err != nil && !errors.Is(err, ssf.ErrTxAborted) // not wait-die: no retry
		if failed || full != "" {
			// Nothing may be booked: an item is full, or a participant failed (no such hotel).
			if err := env.AbortTx(); err != nil {
				return Confirmation{}, err
			}
		}
		committed, endErr := env.EndTx()
		switch {
		case endErr != nil:
			return Confirmation{}, endErr
		case failed:
			return Confirmation{}, err
		case committed:
			return r.confirmation(true, "", attempt), nil
		case full != "":
			return r.refused(full, attempt), nil
		case attempt == maxTxAttempts:
			return r.refused(RefusedContention, attempt), nil
		}
		if err := pause(env, attempt); err != nil {
			return Confirmation{}, err
		}
	}
}

// pause waits before retrying an aborted transaction, until a logged instant plus the
// backoff: a re-execution reads the same instant from the log, so it does not wait again (a
// replay that slept through every pause could outlast the execution's lifetime).
func pause(env *ssf.Env, attempt int) error {
	now, err := env.Now()
	if err != nil {
		return err
	}
	backoff := min(txBackoff<<min(attempt-1, 10), maxTxBackoff)
	wait := min(time.Until(now.Add(backoff)), backoff) // at most the backoff, whatever the clock
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-env.Context().Done(): // the next Env call fails and the execution is abandoned
	case <-t.C:
	}
	return nil
}

// bookBoth asks hotel, then flight, to book; full names the one that was full, if any.
func bookBoth(env Env, r Reservation) (full string, err error) {
	for _, side := range []struct{ ssf, item, full string }{
		{Hotel, r.Hotel, RefusedHotelFull}, {Flight, r.Flight, RefusedFlightFull},
	} {
		took, err := call[bool](env, side.ssf, inventoryOp{Op: "reserve", Item: side.item, Reservation: r.ID, User: r.User, Mode: r.Mode})
		if err != nil {
			return "", err
		}
		if !took {
			return side.full, nil
		}
	}
	return "", nil
}

// reserveWithoutTx books the room, then the seat, as two independent steps: a full flight
// leaves the hotel booked (there is no transaction to undo it).
func reserveWithoutTx(env Env, r Reservation) (Confirmation, error) {
	full, err := bookBoth(env, r)
	if err != nil {
		return Confirmation{}, err
	}
	if full != "" {
		return r.refused(full, 0), nil
	}
	return r.confirmation(true, "", 0), nil
}
