"""Gradient synchronisation checked at the optimizer step (issue 21): SPMD601/602/603/606.

Interface (for code building on it: hooks, `no_sync()`, accumulation, clipping):

* **Where it runs.** interp/modules.py `analyze_function` calls `step.check_training_step(engine, fn, scope)`
  for each function with a `<x>.step()` statement (`trigger.steps_optimizer`, a statement scan: nothing else
  costs anything, and the walk's modules are imported only then). It walks that function with a
  `walker.Walker`, a small interpreter of its own (statements.py, exprs.py, library.py) over the values of
  state.py; unknown parameters of the function come from a builder of the same module (step.py).
* **Parameters.** `state.Param` objects, made where the program makes them (`nn.Parameter(...)`, a torch.nn
  layer's weight/bias, library.py `library_module_init`); `Param.attrs` holds what the program set on them
  (`p.sequence_parallel = True`, `setattr(p, "allreduce", False)`). Models are `state.ModuleObj` trees built by
  walking the program's `__init__`s; `ModuleObj.named_parameters()` lists them (`Param.name` is set there).
  `p.grad` / `p.main_grad` evaluate to `state.GradRef(param)`: the gradient buffer.
* **Gradient state.** `walker.state` is a `state.GradientState`: `(id(param), axis) -> state.AxisGrad`, with
  `status` "pending" (a per-rank partial sum) or "summed", `reduced_at` (the node that reduced it, `by_ddp`
  for DistributedDataParallel), `divisions` (the nodes that divided it by the axis size). No entry = nothing
  known: never reported. `state.get/set/forget/axes_of`; `copy()` and `join()` for the two arms of an `if`
  the walk cannot decide (statements.py `exec_both`: what they disagree on is dropped).
* **Backward.** `sync.backward(walker, loss, node)` (from `loss.backward()`, `torch.autograd.backward`):
  for each model that made the loss (`state.Data.models`), each parameter, each axis the data is split over
  (`Data.shard_axes`, from `x.chunk(world_size(g))[rank(g)]`): pending, unless the parameter is local there
  (`sync.local_on`: Megatron's `tensor_model_parallel` on the tp axis, DeepSpeed's `allreduce = False`); a
  DDP wrapper's axis is summed and divided at once. Repeated backward() calls accumulate (`sync.accumulate`:
  pending stays pending; adding to a gradient already summed keeps that reduction in `AxisGrad.synced_before`);
  accumulation.py `accumulate` applies it after the `register_hook` hooks and reports an early sync, and
  `after_backward` runs the hooks the program registered on parameters and modules.
* **Collectives.** `sync.reduce_value(walker, value, axis, average, node, api, operand)` for a reduction of
  a gradient buffer or a bucket (`state.Bucket`: ops recorded, applied to each gradient by `sync.copy_into`
  at `grad.copy_(synced)`); `sync.reduce(...)` on one parameter (SPMD602 when already summed, SPMD603 for an
  expert's gradient over a whole mesh axis); `sync.divide(...)` (SPMD606 when divided twice).
* **Step checkpoint.** `sync.checkpoint(walker, params, node)` at `optimizer.step()` (library.py
  `call_method` on a `state.Optimizer`): SPMD601 per axis for the parameters still pending there.
* **Context managers.** statements.py `exec_with` evaluates each `with` item and walks the body; a program's
  `@contextmanager` (`no_sync()`) runs up to its `yield` before and the rest after (accumulation.py `enter`).
* **Reports.** `walker.report(violation, node, advice)`: the finding goes to the file holding `node`
  (`walker.remember(node)` when a node is kept to be reported later, from another file).
* **Giving up.** A call the walk cannot follow that receives a model, parameter or optimizer marks the
  parameters `escaped` (`sync.forget_value`: a wrapper such as `fully_shard`, a hook, a distributed optimizer
  may synchronise them; backward() gives them no state again); a gradient passed so is forgotten. A walk too
  long or too deep raises `walker.GiveUp` and reports nothing more.
* **Idioms (issue 20).** The walk follows what the engine follows, with the precision of the direct form:
  registries and config objects read from the engine's globals (engine_values.py `from_engine`: a `DictValue` with
  the entries a `@register` decorator stored, a dataclass / SimpleNamespace object), `functools.partial`
  (`state.Partial`), `*xs` / `**kw` of a known list or dict and a function's own `*args` / `**kwargs`,
  `dict(...)`, `getattr` / `setattr` with a constant name, lambdas (the engine's `FunctionValue` of lambdas.py,
  with a `engine_values.WalkClosure`: the walked names and the defaults, evaluated with the lambda),
  generators run to their end (`exprs.run_generator`),
  plain objects of the program (`state.Instance`: `__iter__`, `__call__`). A list or dict that code the walk
  does not follow may change is spoiled (`state.spoil`): never read as empty or stale.
* **Counted loops** (loops.py): `for i in range(n)`, loops over `x.chunk(n)` and `zip` / `enumerate` / `list`
  of them. A known `n` is walked iteration by iteration; an unknown one (`loops.Count`, named by its code) in a
  loop whose body calls `backward()` is a micro-batch loop walked as its first, a middle and its last
  iteration, the index a `loops.LoopIndex` whose tests against `n` each iteration decides. A plain sum of a
  gradient a later backward() added to (`AxisGrad.synced_before`) summed again is SPMD604
  (`accumulation.report_resummed`): a sync inside the micro-batch loop. A loop that also steps the optimizer
  is a training loop: its body walked once, its target what every iteration is known to be (a batch's tensors).
  A `while` loop calling `backward()` and stepping nothing is walked as three iterations too (statements.py
  `exec_while`; `i = 0; while i < n:` gives `i` as a `LoopIndex`, `i += 1` moves it).
* **Data loaders** (data.py): a `DataLoader` given a `DistributedSampler` is a counted sequence of an unknown
  number of batches, each `Data` split over the sampler's axis (its `rank=` / `num_replicas=`, the world's by
  default), as `x.chunk(world_size)[rank]` is.
* **FSDP2.** `fully_shard(module, mesh=...)` (library.py `GRADIENT_SHARDERS`, a table of library names)
  marks each parameter `Param.sharded_by` the mesh's axes (`state.Mesh`: `init_device_mesh(...,
  mesh_dim_names=...)`, `mesh["dp"]`, the engine's mesh values; the world's without one): backward() averages
  its gradient there (`AxisGrad.wrapper` names it in SPMD602/606), unless `set_requires_gradient_sync(False)`
  switched it off (`Param.sharded_sync`: pending, as without it). A mesh the walk cannot place forgets them.
* **Libraries' own data parallelism, as rules** (library.py `LIBRARY_RULES`: each module's `call` of a
  qualified name and `method` of a wrapper it made; tables of names, read by what they do). megatron.py:
  Megatron's `DistributedDataParallel` reduces nothing in backward, `finish_grad_sync()` /
  `finalize_model_grads` average over dp (`ModuleObj.finish_axis`), the latter also sums the
  `sequence_parallel` marks over tp. deepspeed.py: `deepspeed.initialize(...)` returns an engine wrapping the
  model (`ModuleObj.engine`) and its optimizer; `engine.backward(loss)` averages over dp at an accumulation
  boundary (a loss that `loss.backward()` backpropagates stays pending), `engine.step()` is the checkpoint;
  its docstring says what is not followed (unknown boundaries, ZeRO 3, the expert-data-parallel group). A
  library name a stub re-exports from torch (`deepspeed.comm.all_reduce`) is resolved to torch's first.
* **Declared types** (declared.py, also in `LIBRARY_RULES`): spmd_types' `assert_type` / `mutate_type`, found by
  their stub rules, return the parameter with `Param.declared` (axis -> R, I, V, P or S): its gradient has the
  dual type, so backward() leaves no pending sum on an axis it is declared I (the module's I -> R conversion
  all-reduces it), V or S(d) on (sync.NO_PENDING_SUM); R stays pending where the data is split. A declaration
  the walk cannot read leaves the parameter escaped, as before.
* **Accumulation (SPMD604)** and **clipping (SPMD605)** are accumulation.py (hooks, `no_sync()` contexts,
  micro-batch loops, the gradients a step finds never synced: `claim_unsynced`) and norms.py (squared norms of
  gradients - `grad.norm()`, `torch._foreach_norm`, `get_total_norm`, `clip_grad_norm_` - the rank conditions
  they are counted under, the axes their all-reduce spans).
"""
