"""The AD core: what every mode of differentiation stands on.

``_primitive`` (primitives, their rules and the rule helpers), ``_namespace`` (the rule
namespaces' Protocol and the numpy one), ``_state`` (per-thread recording state),
``_retention`` (records and retention containers), ``_handle`` (``EagerTensor``), ``_bind``
and ``_dispatch`` (the eager binder and its fast paths), ``_tape`` (the tape and the reverse
sweep), ``_jvp`` (forward-mode contexts) and ``_gradients`` (the ``Gradients`` bundle).

It imports nothing from the layers above (no op, transform, tracer or checkpoint region);
where it must run something of theirs it offers a slot that ``tenferro_ad._wiring`` fills.
"""
