package main

import (
	"fmt"
	"sort"
	"strings"

	"google.golang.org/protobuf/types/descriptorpb"
)

type fileDesc = *descriptorpb.FileDescriptorProto

// change is one breaking change, in the file it concerns (the file of the
// previous version for something removed).
type change struct {
	file string
	what string
}

func (c change) String() string { return c.file + ": " + c.what }

// breaking lists the changes from before to after (the compiled files of a
// directory at two versions) that break a peer still using before:
//
//   - a file's package changed (every name it declares changes);
//   - a message, enum, service or rpc removed (a message or enum may move
//     to another file of the same package);
//   - a field removed while its number is not reserved, or renumbered;
//   - a field number kept with another type, another cardinality (repeated,
//     singular, required) or in or out of a oneof;
//   - a field or enum value whose JSON name changes (a rename: grpcurl and
//     every protojson user send and read names);
//   - an enum value removed while its number is not reserved;
//   - an rpc whose request or response type, or client or server
//     streaming, changed.
//
// Adding anything (a field, a message, an enum value, an rpc, a service)
// breaks nothing, nor does a proto3 `optional` added to a field.
func breaking(before, after []fileDesc) []change {
	old, cur := index(before), index(after)
	var out []change
	add := func(file, format string, args ...any) {
		out = append(out, change{file: file, what: fmt.Sprintf(format, args...)})
	}
	moved := map[string]bool{} // files whose package changed
	for _, f := range before {
		if nf, ok := cur.files[f.GetName()]; ok && nf.GetPackage() != f.GetPackage() {
			add(f.GetName(), "package changed from %q to %q", f.GetPackage(), nf.GetPackage())
			moved[f.GetName()] = true
		}
	}
	for _, name := range sortedKeys(old.messages) {
		om := old.messages[name]
		if moved[om.file] {
			continue
		}
		nm, ok := cur.messages[name]
		if !ok {
			if !om.msg.GetOptions().GetMapEntry() { // the map field's change says it
				add(om.file, "message %s removed", name)
			}
			continue
		}
		compareFields(name, om, nm, add)
	}
	for _, name := range sortedKeys(old.enums) {
		oe := old.enums[name]
		if moved[oe.file] {
			continue
		}
		ne, ok := cur.enums[name]
		if !ok {
			add(oe.file, "enum %s removed", name)
			continue
		}
		compareEnum(name, oe, ne, add)
	}
	for _, name := range sortedKeys(old.services) {
		osv := old.services[name]
		if moved[osv.file] {
			continue
		}
		ns, ok := cur.services[name]
		if !ok {
			add(osv.file, "service %s removed", name)
			continue
		}
		compareService(name, osv, ns, add)
	}
	return out
}

type adder func(file, format string, args ...any)

type message struct {
	file string
	msg  *descriptorpb.DescriptorProto
}

type enum struct {
	file string
	enum *descriptorpb.EnumDescriptorProto
}

type service struct {
	file string
	svc  *descriptorpb.ServiceDescriptorProto
}

// declared is what a set of files declares, by full name (no leading dot).
type declared struct {
	files    map[string]fileDesc
	messages map[string]message
	enums    map[string]enum
	services map[string]service
}

func index(files []fileDesc) declared {
	d := declared{files: map[string]fileDesc{}, messages: map[string]message{}, enums: map[string]enum{}, services: map[string]service{}}
	for _, f := range files {
		d.files[f.GetName()] = f
		scope := f.GetPackage()
		for _, m := range f.GetMessageType() {
			d.addMessage(f.GetName(), scope, m)
		}
		for _, e := range f.GetEnumType() {
			d.enums[qualify(scope, e.GetName())] = enum{f.GetName(), e}
		}
		for _, s := range f.GetService() {
			d.services[qualify(scope, s.GetName())] = service{f.GetName(), s}
		}
	}
	return d
}

func (d declared) addMessage(file, scope string, m *descriptorpb.DescriptorProto) {
	name := qualify(scope, m.GetName())
	d.messages[name] = message{file, m}
	for _, n := range m.GetNestedType() {
		d.addMessage(file, name, n)
	}
	for _, e := range m.GetEnumType() {
		d.enums[qualify(name, e.GetName())] = enum{file, e}
	}
}

func qualify(scope, name string) string {
	if scope == "" {
		return name
	}
	return scope + "." + name
}

func compareFields(name string, om message, nm message, add adder) {
	byNum := map[int32]*descriptorpb.FieldDescriptorProto{}
	byName := map[string]*descriptorpb.FieldDescriptorProto{}
	for _, f := range nm.msg.GetField() {
		byNum[f.GetNumber()] = f
		byName[f.GetName()] = f
	}
	for _, of := range om.msg.GetField() {
		num := of.GetNumber()
		nf, ok := byNum[num]
		if !ok {
			switch moved, renamed := byName[of.GetName()]; {
			case renamed:
				add(nm.file, "message %s: field %s renumbered from %d to %d", name, of.GetName(), num, moved.GetNumber())
			case !reservedField(nm.msg, num):
				add(nm.file, "message %s: field %d (%s) removed without reserving its number", name, num, of.GetName())
			}
			continue
		}
		if ot, nt := fieldType(of), fieldType(nf); ot != nt {
			add(nm.file, "message %s: field %d (%s) changed type from %s to %s", name, num, of.GetName(), ot, nt)
		}
		if oc, nc := cardinality(of), cardinality(nf); oc != nc {
			add(nm.file, "message %s: field %d (%s) changed from %s to %s", name, num, of.GetName(), oc, nc)
		}
		if oo, no := oneofOf(om.msg, of), oneofOf(nm.msg, nf); oo != no {
			add(nm.file, "message %s: field %d (%s) moved from %s to %s", name, num, of.GetName(), oneofWords(oo), oneofWords(no))
		}
		if oj, nj := of.GetJsonName(), nf.GetJsonName(); oj != nj || of.GetName() != nf.GetName() {
			add(nm.file, "message %s: field %d renamed from %s (JSON %q) to %s (JSON %q)", name, num, of.GetName(), oj, nf.GetName(), nj)
		}
	}
}

// reservedField tells whether num is in one of m's reserved ranges (whose
// ends are exclusive).
func reservedField(m *descriptorpb.DescriptorProto, num int32) bool {
	for _, r := range m.GetReservedRange() {
		if num >= r.GetStart() && num < r.GetEnd() {
			return true
		}
	}
	return false
}

// fieldType names what a field holds on the wire: a scalar kind, or the
// message or enum type.
func fieldType(f *descriptorpb.FieldDescriptorProto) string {
	switch f.GetType() {
	case descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, descriptorpb.FieldDescriptorProto_TYPE_ENUM, descriptorpb.FieldDescriptorProto_TYPE_GROUP:
		kind := strings.ToLower(strings.TrimPrefix(f.GetType().String(), "TYPE_"))
		return kind + " " + strings.TrimPrefix(f.GetTypeName(), ".")
	default:
		return strings.ToLower(strings.TrimPrefix(f.GetType().String(), "TYPE_"))
	}
}

func cardinality(f *descriptorpb.FieldDescriptorProto) string {
	switch f.GetLabel() {
	case descriptorpb.FieldDescriptorProto_LABEL_REPEATED:
		return "repeated"
	case descriptorpb.FieldDescriptorProto_LABEL_REQUIRED:
		return "required"
	default:
		return "singular"
	}
}

// oneofOf names the oneof f is in, "" for none; the oneof proto3
// `optional` makes for one field is none (it changes no encoding).
func oneofOf(m *descriptorpb.DescriptorProto, f *descriptorpb.FieldDescriptorProto) string {
	if f.OneofIndex == nil || f.GetProto3Optional() {
		return ""
	}
	i := int(f.GetOneofIndex())
	if i < 0 || i >= len(m.GetOneofDecl()) {
		return ""
	}
	return m.GetOneofDecl()[i].GetName()
}

func oneofWords(name string) string {
	if name == "" {
		return "no oneof"
	}
	return "oneof " + name
}

func compareEnum(name string, oe, ne enum, add adder) {
	// Aliases (allow_alias) give a number more than one name.
	names := map[int32]map[string]bool{}
	for _, v := range ne.enum.GetValue() {
		if names[v.GetNumber()] == nil {
			names[v.GetNumber()] = map[string]bool{}
		}
		names[v.GetNumber()][v.GetName()] = true
	}
	for _, v := range oe.enum.GetValue() {
		num := v.GetNumber()
		now, ok := names[num]
		switch {
		case !ok && !reservedValue(ne.enum, num):
			add(ne.file, "enum %s: value %d (%s) removed without reserving its number", name, num, v.GetName())
		case ok && !now[v.GetName()]:
			add(ne.file, "enum %s: value %d renamed from %s to %s (its JSON name)", name, num, v.GetName(), strings.Join(sortedKeys(now), ", "))
		}
	}
}

// reservedValue tells whether num is in one of e's reserved ranges (whose
// ends are inclusive, unlike a message's).
func reservedValue(e *descriptorpb.EnumDescriptorProto, num int32) bool {
	for _, r := range e.GetReservedRange() {
		if num >= r.GetStart() && num <= r.GetEnd() {
			return true
		}
	}
	return false
}

func compareService(name string, was, now service, add adder) {
	methods := map[string]*descriptorpb.MethodDescriptorProto{}
	for _, m := range now.svc.GetMethod() {
		methods[m.GetName()] = m
	}
	for _, om := range was.svc.GetMethod() {
		rpc := name + "." + om.GetName()
		nm, ok := methods[om.GetName()]
		if !ok {
			add(now.file, "rpc %s removed", rpc)
			continue
		}
		if o, n := strings.TrimPrefix(om.GetInputType(), "."), strings.TrimPrefix(nm.GetInputType(), "."); o != n {
			add(now.file, "rpc %s: request changed from %s to %s", rpc, o, n)
		}
		if o, n := strings.TrimPrefix(om.GetOutputType(), "."), strings.TrimPrefix(nm.GetOutputType(), "."); o != n {
			add(now.file, "rpc %s: response changed from %s to %s", rpc, o, n)
		}
		if o, n := om.GetClientStreaming(), nm.GetClientStreaming(); o != n {
			add(now.file, "rpc %s: client streaming changed from %t to %t", rpc, o, n)
		}
		if o, n := om.GetServerStreaming(), nm.GetServerStreaming(); o != n {
			add(now.file, "rpc %s: server streaming changed from %t to %t", rpc, o, n)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
