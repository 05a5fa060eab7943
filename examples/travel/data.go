package travel

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Sizes of the generated data: Beldi's workload picks a hotel and a flight out of 100 each.
const (
	NumHotels  = 100
	NumFlights = 100
	NumUsers   = 100
)

// Where the hotels are: around central San Francisco, as in DeathStarBench.
const (
	centerLat = 37.7749
	centerLon = -122.4194
	spreadLat = 0.2 // degrees: about 22 km north to south
	spreadLon = 0.25
)

// HotelID, FlightID and UserName name the i-th hotel, flight and user.
func HotelID(i int) string  { return fmt.Sprintf("h%02d", i) }
func FlightID(i int) string { return fmt.Sprintf("f%02d", i) }
func UserName(i int) string { return fmt.Sprintf("user%02d", i) }

// Data is the application's seed data.
type Data struct {
	Hotels  []HotelData
	Flights []FlightData
	Users   []Credentials
}

// HotelData is everything the SSFs know about one hotel.
type HotelData struct {
	Profile HotelProfile
	Lat     float64
	Lon     float64
	Price   int64
	Rate    float64
	Rooms   int64
}

// FlightData is a flight and its seats.
type FlightData struct {
	ID    string
	Seats int64
}

// Credentials are a user's name and password.
type Credentials struct {
	Name, Password string
}

var (
	hotelNames = []string{"Bay", "Golden Gate", "Harbor", "Union", "Market", "Mission", "Presidio", "Nob Hill", "Marina", "Sunset"}
	hotelKinds = []string{"Inn", "Hotel", "Suites", "Lodge", "House"}
	streets    = []string{"Market St", "Mission St", "Geary Blvd", "Van Ness Ave", "Lombard St", "Valencia St", "Castro St", "Divisadero St"}
)

// Generate draws the seed data from seed: NumHotels hotels, NumFlights flights and NumUsers
// users. Every hotel has between ⌈capacity/2⌉ and capacity rooms, every flight as many seats:
// small capacities make hotels and flights fill up, and reservations contend for them.
func Generate(seed uint64, capacity int64) Data {
	rng := rand.New(rand.NewPCG(seed, 0))
	units := func() int64 { lo := (capacity + 1) / 2; return lo + rng.Int64N(capacity-lo+1) }
	var d Data
	for i := range NumHotels {
		id := HotelID(i)
		rate := float64(10+rng.IntN(41)) / 10 // 1.0 to 5.0 stars
		d.Hotels = append(d.Hotels, HotelData{
			Profile: HotelProfile{
				Hotel:       id,
				Name:        fmt.Sprintf("%s %s %d", hotelNames[rng.IntN(len(hotelNames))], hotelKinds[rng.IntN(len(hotelKinds))], i),
				Address:     fmt.Sprintf("%d %s, San Francisco", 1+rng.IntN(3000), streets[rng.IntN(len(streets))]),
				Description: fmt.Sprintf("A %.1f-star hotel.", rate),
			},
			Lat:   centerLat + (rng.Float64()-0.5)*spreadLat,
			Lon:   centerLon + (rng.Float64()-0.5)*spreadLon,
			Price: 80 + 10*rng.Int64N(33), // $80 to $400 a night
			Rate:  rate,
			Rooms: units(),
		})
	}
	for i := range NumFlights {
		d.Flights = append(d.Flights, FlightData{ID: FlightID(i), Seats: units()})
	}
	for i := range NumUsers {
		d.Users = append(d.Users, Credentials{Name: UserName(i), Password: fmt.Sprintf("pw-%x", rng.Uint32())})
	}
	return d
}

// SeedRequest loads part of the seed data into one SSF.
type SeedRequest struct {
	SSF, ID string // the SSF and the request id
	Input   any
}

// Seed returns the requests that load d into the SSFs that own it, one per SSF. Their ids are
// fixed, so sending them again to a store that has them changes nothing.
func (d Data) Seed() []SeedRequest {
	accounts := map[string]Account{}
	for _, u := range d.Users {
		accounts[u.Name] = Account{PasswordSHA256: PasswordHash(u.Password)}
	}
	var points []Point
	var catalog []Listing
	plans, profiles, rooms := map[string]Plan{}, map[string]HotelProfile{}, map[string]int64{}
	for _, h := range d.Hotels {
		id := h.Profile.Hotel
		p := Point{Hotel: id, Lat: h.Lat, Lon: h.Lon}
		points = append(points, p)
		catalog = append(catalog, Listing{Point: p, Price: h.Price, Rate: h.Rate})
		plans[id] = Plan{Hotel: id, Price: h.Price, Rate: h.Rate}
		profiles[id] = h.Profile
		rooms[id] = h.Rooms
	}
	seats := map[string]int64{}
	for _, f := range d.Flights {
		seats[f.ID] = f.Seats
	}
	return []SeedRequest{
		{User, "seed-user", userOp{Op: "load", Accounts: accounts}},
		{Geo, "seed-geo", geoOp{Op: "load", Points: points}},
		{Rate, "seed-rate", rateOp{Op: "load", Plans: plans}},
		{Profile, "seed-profile", profileOp{Op: "load", Profiles: profiles}},
		{Recommend, "seed-recommend", recommendOp{Op: "load", Catalog: catalog}},
		{Hotel, "seed-hotel", inventoryOp{Op: "load", Capacity: rooms}},
		{Flight, "seed-flight", inventoryOp{Op: "load", Capacity: seats}},
	}
}

// Workload draws frontend requests the way Beldi's benchmark does: a reservation picks a hotel
// and a flight by a normal distribution over their indexes (mean 50, standard deviation 15 of
// 100, clamped), so the middle ones are in demand. Not safe for concurrent use.
type Workload struct {
	data Data
	rng  *rand.Rand
}

// NewWorkload returns a workload over d drawn from seed.
func NewWorkload(d Data, seed uint64) *Workload {
	return &Workload{data: d, rng: rand.New(rand.NewPCG(seed, 1))}
}

// index draws an index in [0, n) from a normal distribution centred on n/2.
func (w *Workload) index(n int) int {
	i := int(math.Round(float64(n)/2 + 0.15*float64(n)*w.rng.NormFloat64()))
	return min(max(i, 0), n-1)
}

func (w *Workload) user() Credentials { return w.data.Users[w.rng.IntN(len(w.data.Users))] }

// Reserve draws a reservation by a random user, in mode.
func (w *Workload) Reserve(mode Mode) Request {
	u := w.user()
	return Request{Op: OpReserve, User: u.Name, Password: u.Password, Mode: mode,
		Hotel: w.data.Hotels[w.index(len(w.data.Hotels))].Profile.Hotel, Flight: w.data.Flights[w.index(len(w.data.Flights))].ID}
}

// Browse draws a search (60%), a recommendation (35%) or a login (5%, one in ten with a wrong
// password), from a random point in the city.
func (w *Workload) Browse() Request {
	lat := centerLat + (w.rng.Float64()-0.5)*spreadLat
	lon := centerLon + (w.rng.Float64()-0.5)*spreadLon
	switch p := w.rng.Float64(); {
	case p < 0.60:
		return Request{Op: OpSearch, Lat: lat, Lon: lon,
			MaxPrice: []int64{0, 200, 300}[w.rng.IntN(3)], MinRate: []float64{0, 3, 4}[w.rng.IntN(3)]}
	case p < 0.95:
		return Request{Op: OpRecommend, Lat: lat, Lon: lon, By: []string{ByDistance, ByRate, ByPrice}[w.rng.IntN(3)]}
	}
	u := w.user()
	if w.rng.IntN(10) == 0 {
		u.Password += "-wrong"
	}
	return Request{Op: OpLogin, User: u.Name, Password: u.Password}
}

// Mix draws reservations reservations in mode and browse browsing requests (Browse), the
// browsing spread evenly among the reservations.
func (w *Workload) Mix(reservations, browse int, mode Mode) []Request {
	out := make([]Request, 0, reservations+browse)
	for reserved, browsed := 0, 0; reserved+browsed < reservations+browse; {
		if reserved == reservations || browsed*reservations < reserved*browse {
			out, browsed = append(out, w.Browse()), browsed+1
		} else {
			out, reserved = append(out, w.Reserve(mode)), reserved+1
		}
	}
	return out
}
