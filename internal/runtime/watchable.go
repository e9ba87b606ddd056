package runtime

import (
	"context"
	"reflect"
	"time"
)

// Types of package context whose end a context.AfterFunc joins as a
// child, under the context's lock, without a goroutine to watch it.
var (
	cancelCtxType = ctxType(func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) })
	timerCtxType  = ctxType(func() (context.Context, context.CancelFunc) {
		return context.WithDeadline(context.Background(), time.Now().Add(time.Hour))
	})
	valueCtxType = reflect.TypeOf(context.WithValue(context.Background(), watchableKey{}, 0))
)

type watchableKey struct{}

func ctxType(mk func() (context.Context, context.CancelFunc)) reflect.Type {
	ctx, cancel := mk()
	defer cancel()
	return reflect.TypeOf(ctx)
}

// watchable reports whether ctx is made by package context down to a
// context that can end (WithCancel, WithTimeout, WithDeadline, and
// WithValue on those): context.AfterFunc(ctx, f) then costs a child
// entry, not a goroutine, and runs nothing of ctx's after it returns.
func watchable(ctx context.Context) bool {
	for {
		switch reflect.TypeOf(ctx) {
		case cancelCtxType, timerCtxType:
			return true
		case valueCtxType:
			// valueCtx embeds its parent as its first field; a layout
			// that changed in a later Go release makes it unwatchable
			// rather than a panic.
			v := reflect.ValueOf(ctx).Elem()
			if v.Kind() != reflect.Struct || v.NumField() == 0 {
				return false
			}
			f := v.Field(0)
			if f.Kind() != reflect.Interface || !f.CanInterface() {
				return false
			}
			parent, ok := f.Interface().(context.Context)
			if !ok || parent == nil {
				return false
			}
			ctx = parent
		default:
			return false
		}
	}
}
