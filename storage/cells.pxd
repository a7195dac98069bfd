# Cython declarations for cells.py (its "augmenting" .pxd): types for the compiled build;
# the .py stays the reference and runs unchanged without them. See docs/hot-core.md.
# Cell becomes an extension type: every counter (INCR, HINCRBY, ZINCRBY) and every element
# written more than once is one, and a write or a peer's op reads and replaces its two
# fields several times (remove, assign, incr, live, value, counter), each a slot
# descriptor found by a generic attribute lookup before; now C reads. Its methods on
# those paths are cpdef: a C call from one another, a method call from anyone else.

cimport cython

cdef class Cell:
    cdef public list assigns
    cdef public dict counters

    cpdef object remove(self, dict seen, object observed=*)
    cpdef object assign(self, dict seen, object observed, object ts, object origin, object seq,
                        object value)
    cpdef object incr(self, object delta, object ts, object origin, object seq, object base=*)
    cpdef bint live(self) except -1
    cpdef object value(self)
    cpdef object counter(self)
    cpdef list observed(self)

# The helpers every keyed write and applied op calls.
cpdef Cell inflate(object cell)
cpdef object settle(Cell cell)
cpdef tuple shared_dot(object ts, object origin, object seq)
@cython.locals(d=tuple)  # a dot, always a tuple: its fields read in C
cpdef object reg(object ts, object origin, object seq, object value)
cpdef object num_in(object raw)
cpdef bytes num_bytes(object n)

# A new Cell's shared, never-changed empty assigns (cells.py): typed, so assign()'s
# identity test reads it in C.
cdef list _NO_ASSIGNS
