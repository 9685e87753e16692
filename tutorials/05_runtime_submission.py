"""Running programs through the runtime: submit, wait, take an output, handle refusals.

A program is a `CompiledGraph` of numpy kernels.  You hand its inputs over as an
owning package (`ExecutionInputs`), pick an engine by id, and get back a handle whose
`wait()` gives exactly one terminal outcome.  Nothing is copied: outputs are the group's
own records, and a refusal hands you back the very package you passed in.  A device
engine keeps its outputs in device memory until you download them (section 7).

Run with ``python tutorials/05_runtime_submission.py``.
"""

from __future__ import annotations

import numpy as np

import tenferro_storage as ts
from tenferro_storage import providers
from tenferro_storage import runtime as rt
from tenferro_storage.errors import AccessError, SubmitRejected
from tenferro_storage.providers import Fault, SimulatedAsyncProvider

# 1. Discover engines and pick one by id (never by position).
for info in rt.engines():
    mode = "synchronous" if info.synchronous else "asynchronous"
    domains = sorted(map(str, info.domains))
    print(f"engine {info.id}: {mode}, endpoint {info.endpoint}, domains {domains}")
host = rt.host_engine()

# 2. Write a program: z = x*x + y, returned together with x (identity) and a shape.
b = rt.ProgramBuilder(2, name="square_plus")
x, y = b.inputs
z = b.apply(np.add, b.apply(np.multiply, x, x), y)
program = b.build(z, x, b.metadata((3,)))
print(program)

# 3. Package the inputs: the group moves into ExecutionInputs.
group = ts.AllocationGroup()
sx = group.insert(ts.arange(3.0))
sy = group.insert(ts.ones(3))
inputs = rt.ExecutionInputs(group, [sx, sy])

# 4. Submit, wait, and take an output.
outcome = rt.submit(host, program, inputs).wait()
match outcome:
    case rt.Completed(bundle):
        print("kinds:", [k.value for k in bundle.kinds])
        with bundle.output(1) as same_x:  # a borrow of the input record: no copy
            print("identity output:", same_x.to_numpy())
        print("metadata output:", bundle.output(2))
        result = bundle.into_output(0)  # consumes the bundle; the rest goes with it
        print("z =", result.to_numpy())
    case _:
        raise SystemExit(f"unexpected outcome: {outcome!r}")
del outcome, bundle

# 5. A refusal before admission gives back the exact package.
g2 = ts.AllocationGroup()
s2 = g2.insert(ts.arange(3.0))
lonely = rt.ExecutionInputs(g2, [s2])  # one binding, but the program takes two
try:
    rt.submit(host, program, lonely)
except SubmitRejected as err:
    cause, back = err.into_parts()
    print(f"rejected ({cause.kind.name}): got the same package back: {back is lonely}")
del back

# 6. An asynchronous engine; a failure after enqueue returns the owners after retirement.
with SimulatedAsyncProvider(name="tutorial-sim") as sim:
    assert sim.engine is not None
    g3 = ts.AllocationGroup()
    pkg = rt.ExecutionInputs(g3, [g3.insert(ts.arange(3.0)), g3.insert(ts.ones(3))])
    sim.inject(Fault.FAIL_AFTER_ENQUEUE)  # test-only fault injection
    handle = rt.submit(sim.engine, program, pkg)
    failed = handle.wait()
    match failed:
        case rt.RetiredFailed(cause, inputs_back):
            print(f"failed after enqueue ({cause.kind.name}); inputs back: {inputs_back!r}")
    del failed, inputs_back, pkg

    # 7. Device memory: the simulated device's outputs stay in its own domain, which the
    #    host cannot read.  download() is the way to the host (one recorded TRANSFER);
    #    upload() puts a host value into device memory the same way.
    g4 = ts.AllocationGroup()
    device_x = rt.upload(sim.engine, ts.arange(3.0))  # one TRANSFER into sim-device:<n>
    pkg = rt.ExecutionInputs(g4, [g4.insert(device_x), g4.insert(ts.ones(3))])
    done = rt.submit(sim.engine, program, pkg).wait()
    assert isinstance(done, rt.Completed)
    z_device = done.bundle.into_output(0)
    print("z lives in", providers.domain_of(z_device))
    try:
        z_device.to_numpy()  # a host read of device memory is refused, nothing changes
    except AccessError as err:
        print("host read refused:", err.__cause__)
    with ts.ledger.capture() as rec:
        z_host = rt.download(z_device)  # the explicit, recorded copy
    print("downloaded z =", z_host.to_numpy(), "copies:", repr(rec.copies))
    del done, z_device, z_host, pkg
print("done")
