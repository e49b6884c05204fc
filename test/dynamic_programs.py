"""Programs of the dynamic extension (`any`) that native code must run exactly as the
interpreter does: shared by test_aot (brilc) and test_jit (`brili --jit`).

`DYNAMIC_LOOP` fills a ptr<any> region with values of every kind in a loop and
reads them back in another (through `any` parameters and results, and typed
variables that hold what the interpreter gives them unchecked); its first argument
picks an operation that meets a value of the wrong kind half way through the
loop (`DYNAMIC_LOOP_ERRORS`: mode -> the interpreter's message).
"""

DYNAMIC_LOOP = """
@show(x: any) {
  print x;
}
@ident(x: any): any {
  ret x;
}
@typed(x: int): int {
  ret x;
}
@fill(p: ptr<any>, n: int) {
  i: int = const 0;
  zero: int = const 0;
  one: int = const 1;
  two: int = const 2;
  four: int = const 4;
  q: ptr<any> = id p;
.loop:
  done: bool = ge i n;
  br done .end .body;
.body:
  r: int = div i four;
  r: int = mul r four;
  r: int = sub i r;
  is0: bool = eq r zero;
  br is0 .int .n1;
.int:
  store q i;
  jmp .next;
.n1:
  is1: bool = eq r one;
  br is1 .bool .n2;
.bool:
  b: bool = lt i four;
  store q b;
  jmp .next;
.n2:
  is2: bool = eq r two;
  br is2 .float .char;
.float:
  f: float = const 0.25;
  store q f;
  jmp .next;
.char:
  c: char = const 'z';
  store q c;
.next:
  q: ptr<any> = ptradd q one;
  i: int = add i one;
  jmp .loop;
.end:
  ret;
}
@main(mode: int, n: int) {
  zero: int = const 0;
  one: int = const 1;
  two: int = const 2;
  p: ptr<any> = alloc n;
  ints: ptr<int> = alloc n;
  call @fill p n;
  store ints n;
  half: int = div n two;
  sum: any = const 0;
  i: int = const 0;
  q: ptr<any> = id p;
.loop:
  done: bool = ge i n;
  br done .end .body;
.body:
  v: any = load q;
  call @show v;
  w: any = call @ident v;
  late: bool = ge i half;
  br late .trouble .next;
.trouble:
  m1: bool = eq mode one;
  br m1 .add .n2;
.add:
  x: int = load q;
  print x;
  y: int = add x one;
  jmp .next;
.n2:
  m2: bool = eq mode two;
  br m2 .arg .n3;
.arg:
  z: int = call @typed w;
  jmp .next;
.n3:
  three: int = const 3;
  m3: bool = eq mode three;
  br m3 .result .n4;
.result:
  z: int = call @ident v;
  jmp .next;
.n4:
  four: int = const 4;
  m4: bool = eq mode four;
  br m4 .store .n5;
.store:
  store ints w;
  jmp .next;
.n5:
  five: int = const 5;
  m5: bool = eq mode five;
  br m5 .br .n6;
.br:
  br w .next .next;
.n6:
  six: int = const 6;
  m6: bool = eq mode six;
  br m6 .and .n7;
.and:
  a: bool = and v v;
  jmp .next;
.n7:
  seven: int = const 7;
  m7: bool = eq mode seven;
  br m7 .ptradd .n8;
.ptradd:
  k: any = id w;
  pk: ptr<any> = ptradd p k;
  jmp .next;
.n8:
  eight: int = const 8;
  m8: bool = eq mode eight;
  br m8 .char .n9;
.char:
  ci: int = char2int w;
  jmp .next;
.n9:
  nine: int = const 9;
  m9: bool = eq mode nine;
  br m9 .id .next;
.id:
  c: int = id w;
  print c;
  d: int = mul c c;
.next:
  s: int = id sum;
  is_int: bool = eq i zero;
  br is_int .count .skip;
.count:
  t: int = id v;
  s: int = add s t;
  sum: any = id s;
.skip:
  q: ptr<any> = ptradd q one;
  i: int = add i one;
  jmp .loop;
.end:
  store p ints;
  pi: ptr<int> = load p;
  x: int = load pi;
  shown: any = load p;
  print sum x shown;
  free ints;
  free p;
}
"""

# mode -> the error at the first value of the wrong kind after half the loop (0: none)
DYNAMIC_LOOP_ERRORS = {
    0: None,
    1: "add argument 0 must be a int",
    2: "function argument type mismatch",
    3: "type of value returned by function does not match destination type",
    4: "store argument 1 must be a int",
    5: "br argument 0 must be a bool",
    6: "and argument 0 must be a bool",
    7: "ptradd argument 1 must be a int",
    8: "char2int argument 0 must be a char",
    9: "mul argument 0 must be a int",
}

# Small programs at the edges, each run with no arguments.
DYNAMIC_UNITS = {
    # Values of every kind printed through one `any` variable.
    "any_print_kinds": """
@main {
  i: int = const 7;
  b: bool = const false;
  f: float = const -1.5;
  c: char = const 'x';
  one: int = const 1;
  p: ptr<int> = alloc one;
  a: any = id i;
  b2: any = id b;
  f2: any = id f;
  c2: any = id c;
  p2: any = id p;
  fs: ptr<float> = alloc one;
  f3: any = id fs;
  print a b2 f2 c2 p2;
  free p2;
  free f3;
  a: any = const true;
  print a a;
}
""",
    # A float stored in ptr<any> and loaded as an int: the int variable holds the float
    # (printed as one) until an op needs an int.
    "any_float_loaded_as_int": """
@main {
  one: int = const 1;
  f: float = const 2.5;
  p: ptr<any> = alloc one;
  store p f;
  x: int = load p;
  print x;
  y: int = add x one;
  print y;
  free p;
}
""",
    # `id` does not check: a bool in an int variable.
    "any_id_does_not_check": """
@main {
  b: bool = const true;
  a: any = id b;
  c: int = id a;
  print c;
  d: int = add c c;
}
""",
    # Results of `any` functions checked against the destination's kind, and declared
    # types compared statically afterwards.
    "any_results": """
@pick(b: bool): any {
  br b .t .f;
.t:
  x: int = const 3;
  ret x;
.f:
  y: char = const 'q';
  ret y;
}
@typed(p: ptr<any>): int {
  v: int = load p;
  ret v;
}
@main {
  t: bool = const true;
  f: bool = const false;
  a: any = call @pick t;
  c: any = call @pick f;
  print a c;
  n: int = call @pick t;
  print n;
  one: int = const 1;
  p: ptr<any> = alloc one;
  store p c;
  k: any = call @typed p;
  print k;
  k2: char = call @typed p;
  print k2;
}
""",
    # A pointer in a ptr<any> cell, loaded back as its own type and as `any`.
    "any_pointer_in_cell": """
@main {
  one: int = const 1;
  two: int = const 2;
  inner: ptr<int> = alloc two;
  outer: ptr<any> = alloc two;
  store outer inner;
  o2: ptr<any> = ptradd outer one;
  store o2 two;
  q: ptr<int> = load outer;
  seven: int = const 7;
  store q seven;
  x: int = load inner;
  print x;
  r: any = load outer;
  print r;
  free r;
  free outer;
}
""",
    # An abort restores an `any` variable (of another kind by then).
    "any_speculation": """
@main {
  a: any = const 1;
  b: bool = const false;
  speculate;
  a: any = const true;
  guard b .fail;
  commit;
.fail:
  print a;
  c: int = add a a;
  print c;
  x: bool = or a a;
}
""",
    # ssa2 shadows of `any` values (set of a typed value tags it).
    "any_shadows": """
@main {
  a: any = const 1.5;
  i: int = const 4;
  set x a;
  x: any = get;
  print x;
  set x i;
  x: any = get;
  print x;
  b: bool = eq x i;
  print b;
}
""",
    "any_br": """
@main {
  a: any = const true;
  br a .t .f;
.t:
  print a;
  a: any = const 5;
  br a .t .f;
.f:
  print a;
}
""",
    "any_argument_checked": """
@show(x: any, y: int) {
  print x y;
}
@main {
  c: char = const 'z';
  call @show c c;
}
""",
}


# ssa2's undefined value held as an `any` value (in variables, a ptr<any> cell, `any`
# arguments and results, a shadow); mode -> the error that meets it.
DYNAMIC_UNDEF = """
@pass(x: any): any {
  ret x;
}
@maybe(b: bool): int {
  u: int = undef;
  br b .y .n;
.y:
  ret u;
.n:
  one: int = const 1;
  ret one;
}
@main(m: int) {
  u: int = undef;
  a: any = id u;
  one: int = const 1;
  p: ptr<any> = alloc one;
  store p u;
  w: any = load p;
  r: any = call @pass u;
  f: bool = const false;
  k: int = call @maybe f;
  print k;
  set s u;
  s: any = get;
  zero: int = const 0;
  two: int = const 2;
  m0: bool = eq m zero;
  br m0 .a .b;
.a:
  print one a;
.b:
  m1: bool = eq m one;
  br m1 .c .d;
.c:
  x: int = add w one;
.d:
  m2: bool = eq m two;
  br m2 .e .g;
.e:
  t: bool = const true;
  k2: any = call @maybe t;
  print one;
  k3: int = call @maybe t;
.g:
  free p;
  print s;
}
"""

DYNAMIC_UNDEF_ERRORS = {
    0: "print of undefined value",
    1: "add argument 0 must be a int",
    2: "type of value returned by function does not match destination type",
    3: "print of undefined value",
}

# load, store and ptradd through pointers in variables declared `any` (the cells'
# layout known from the tag at run time); mode -> the error (0: none).
DYNAMIC_THROUGH_ANY = """
@main(m: int) {
  one: int = const 1;
  two: int = const 2;
  pi: ptr<int> = alloc two;
  pf: ptr<float> = alloc two;
  pa: ptr<any> = alloc two;
  a: any = id pi;
  b: any = id pf;
  c: any = id pa;
  a1: any = ptradd a one;
  store a1 two;
  f: float = const 1.5;
  store b f;
  store c f;
  c1: any = ptradd c one;
  store c1 pi;
  x: int = load a1;
  y: any = load b;
  z: any = load c;
  w: ptr<int> = load c1;
  w1: ptr<int> = ptradd w one;
  v: int = load w1;
  print x y z v;
  zero: int = const 0;
  m0: bool = eq m zero;
  br m0 .ok .bad;
.bad:
  m1: bool = eq m one;
  br m1 .b1 .b2;
.b1:
  store a f;
.b2:
  m2: bool = eq m two;
  br m2 .c2 .c3;
.c2:
  k: any = id f;
  q: any = ptradd a k;
.c3:
  t: bool = const true;
  n: int = load t;
.ok:
  free pi;
  free pf;
  free pa;
}
"""

DYNAMIC_THROUGH_ANY_ERRORS = {
    0: None,
    1: "store argument 1 must be a int",
    2: "ptradd argument 1 must be a int",
    3: "load argument 0 must be a Pointer",
}

# Programs with a mode argument: name -> (source, {mode: the error, or None}).
DYNAMIC_MODES = {
    "dynamic_undef": (DYNAMIC_UNDEF, DYNAMIC_UNDEF_ERRORS),
    "dynamic_through_any": (DYNAMIC_THROUGH_ANY, DYNAMIC_THROUGH_ANY_ERRORS),
}
