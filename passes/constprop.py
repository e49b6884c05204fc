"""Global constant propagation with branch folding (conditional constant propagation).

A forward analysis over the CFG maps each variable to a constant where every
path reaching that point assigns it that constant.  Only edges that can run are
followed: a `br` on a known condition sends its state down the taken edge alone,
so constants that meet only on dead paths stay constants.  At the function's
start nothing is constant, so a variable that some path leaves unassigned is
never treated as a constant.

Rewrites: an op (or copy) whose result is known becomes `const` (when its
declared type can hold the value in JSON); a `br` on a known condition becomes
a `jmp`.  Blocks that become unreachable are left for `cfgclean`.
"""

from bril import ops
from bril.cfg import CFG
from .safety import map_functions
from bril.folding import const_of, fold, as_const_instr


def _value(instr, env):
    """The Const an instruction assigns, given the constants in `env`, or None."""
    op = instr["op"]
    if op == "const":
        return const_of(instr)
    args = instr.get("args", ())
    if op == "id":
        return env.get(args[0]) if len(args) == 1 else None
    if op in ops.FOLDABLE:
        consts = [env.get(a) for a in args]
        if None not in consts:
            return fold(op, consts)
    return None


def _step(instr, env):
    d = instr.get("dest")
    if d is not None:
        c = _value(instr, env)
        if c is None:
            env.pop(d, None)
        else:
            env[d] = c


def _taken(term, env):
    """The only label a `br` can take, if its condition is a known boolean."""
    if term is not None and term["op"] == "br" and len(term.get("args", ())) == 1:
        c = env.get(term["args"][0])
        if c is not None and c.type == "bool" and len(term.get("labels", ())) == 2:
            return term["labels"][0 if c.value else 1]
    return None


def _meet(envs):
    out = envs[0]
    if len(envs) == 1:
        return dict(out)
    for e in envs[1:]:
        if e is out:
            continue
        # Mostly the very same Const objects flow in: test identity before __eq__.
        get = e.get
        out = {v: c for v, c in out.items()
               if (d := get(v)) is c or d is not None and d == c}
    return dict(out) if out is envs[0] else out


def analyze(cfg):
    """(in_env, live_succs): per reached block, the constants at its start and the
    successors control can go to from it."""
    in_env, out_env, live_succs = {}, {}, {}
    work = [cfg.entry]
    while work:
        name = work.pop()
        block = cfg.blocks[name]
        envs = [out_env[p] for p in cfg.preds[name] if name in live_succs.get(p, ())]
        if name == cfg.entry:
            envs.append({})                 # nothing is constant (or assigned) at the start
        env = _meet(envs)
        if name in in_env and in_env[name] == env:
            continue
        in_env[name] = dict(env)
        for instr in block.instrs:
            _step(instr, env)
        taken = _taken(block.terminator, env)
        succs = [taken] if taken is not None else cfg.succs[name]
        out_env[name], live_succs[name] = env, succs
        work.extend(s for s in succs if s in cfg.blocks)
    return in_env, live_succs


def constprop_cfg(cfg):
    in_env, _ = analyze(cfg)
    for name, env in in_env.items():
        block = cfg.blocks[name]
        env = dict(env)
        new = []
        for instr in block.instrs:
            d = instr.get("dest")
            if d is not None and instr["op"] != "const":
                c = _value(instr, env)
                if c is not None:
                    instr = as_const_instr(instr, c) or instr
            taken = _taken(instr, env) if instr.get("op") == "br" else None
            if taken is not None:
                instr = {k: v for k, v in instr.items() if k != "args"}
                instr["op"], instr["labels"] = "jmp", [taken]
            _step(instr, env)
            new.append(instr)
        block.instrs = new
    cfg.recompute_edges()
    return cfg


def constprop_instrs(func):
    return constprop_cfg(CFG.from_function(func)).to_instrs()


def constprop(prog):
    """Pass: global constant propagation and folding, with branch folding."""
    return map_functions(prog, constprop_instrs)
