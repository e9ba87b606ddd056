package flow

// windowedMax tracks the maximum of a series over a sliding window of "time"
// (round trips, for the bandwidth estimate), keeping the best, second best and
// third best samples of successive sub-windows as Kathleen Nichols' algorithm
// does (Linux lib/win_minmax.c). It needs constant memory and time.
type windowedMax struct {
	s     [3]filterSample
	valid bool
}

type filterSample struct {
	t int64
	v float64
}

// get returns the windowed maximum, or 0 and false before the first sample.
func (f *windowedMax) get() (float64, bool) { return f.s[0].v, f.valid }

func (f *windowedMax) reset(t int64, v float64) {
	f.s = [3]filterSample{{t, v}, {t, v}, {t, v}}
	f.valid = true
}

// update adds sample v taken at t and returns the new maximum over (t-win, t].
func (f *windowedMax) update(win, t int64, v float64) float64 {
	if !f.valid || v >= f.s[0].v || t-f.s[2].t > win {
		f.reset(t, v)
		return v
	}
	next := filterSample{t, v}
	if v >= f.s[1].v {
		f.s[1], f.s[2] = next, next
	} else if v >= f.s[2].v {
		f.s[2] = next
	}
	// Age the sub-window champions so the best sample is at most win old.
	dt := t - f.s[0].t
	switch {
	case dt > win:
		f.s[0], f.s[1], f.s[2] = f.s[1], f.s[2], next
		if t-f.s[0].t > win {
			f.s[0], f.s[1], f.s[2] = f.s[1], f.s[2], next
		}
	case f.s[1].t == f.s[0].t && dt > win/4:
		f.s[1], f.s[2] = next, next
	case f.s[2].t == f.s[1].t && dt > win/2:
		f.s[2] = next
	}
	return f.s[0].v
}
