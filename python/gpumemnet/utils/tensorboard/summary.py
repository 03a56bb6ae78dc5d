"""torch.utils.tensorboard.summary: Summary protos built apart from a writer, for code that writes them itself
(Lightning's TensorBoardLogger: hparams(...) through SummaryWriter._get_file_writer().add_summary)."""
import importlib
import numbers

import numpy as np

from ... import _C

__all__ = ["scalar", "hparams"]


def tensorboard_module(name):
    """The tensorboard package's module `name`, or PyTorch's ImportError where the package is missing."""
    try:
        return importlib.import_module("tensorboard." + name)
    except ImportError as e:
        raise ImportError("TensorBoard logging requires TensorBoard version 1.15 or above "
                          "(pip install tensorboard)") from e


def _summary_pb2():
    return tensorboard_module("compat.proto.summary_pb2")


def _number(v):
    """A tensor's or array's one value, or a number, as a float."""
    if isinstance(v, _C.TensorBase):
        v = v.detach().cpu().double().numpy()
    return float(np.asarray(v, dtype=np.float64).reshape(-1)[0])


def scalar(name, tensor, collections=None, new_style=False, double_precision=False):
    """A Summary of one value (simple_value) under the tag name."""
    pb = _summary_pb2()
    return pb.Summary(value=[pb.Summary.Value(tag=name, simple_value=_number(tensor))])


def hparams(hparam_dict=None, metric_dict=None, hparam_domain_discrete=None):
    """(experiment, session start, session end) Summaries for TensorBoard's HParams plugin, as PyTorch's: numbers
    (bools among them, as in PyTorch) and tensors are FLOAT64 hyperparameters, strings STRING; None values are
    left out; hparam_domain_discrete gives a hyperparameter its list of possible values."""
    from google.protobuf import struct_pb2
    from tensorboard.plugins.hparams import metadata
    from tensorboard.plugins.hparams.api_pb2 import DataType, Experiment, HParamInfo, MetricInfo, MetricName, Status
    from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData, SessionEndInfo, SessionStartInfo
    pb = _summary_pb2()
    if not isinstance(hparam_dict, dict) or not isinstance(metric_dict, dict):
        raise TypeError("hparam_dict and metric_dict should be dictionary.")
    domains = hparam_domain_discrete or {}
    if not isinstance(domains, dict):
        raise TypeError("parameter: hparam_domain_discrete should be a dictionary, nothing else")
    for k, values in domains.items():
        if k not in hparam_dict or not isinstance(values, list) or \
                not all(isinstance(d, type(hparam_dict[k])) for d in values):
            raise TypeError(f"parameter: hparam_domain_discrete[{k}] should be a list of same type as "
                            f"hparam_dict[{k}].")
    infos, start = [], SessionStartInfo()
    for k, v in hparam_dict.items():
        if v is None:
            continue
        if isinstance(v, (numbers.Number, _C.TensorBase)) and not isinstance(v, complex):
            start.hparams[k].number_value = _number(v)
            kind, domain = "DATA_TYPE_FLOAT64", [struct_pb2.Value(number_value=d) for d in domains.get(k, ())]
        elif isinstance(v, str):
            start.hparams[k].string_value = v
            kind, domain = "DATA_TYPE_STRING", [struct_pb2.Value(string_value=d) for d in domains.get(k, ())]
        else:
            raise ValueError("value should be one of int, float, str, bool, or torch.Tensor")
        infos.append(HParamInfo(name=k, type=DataType.Value(kind),
                                domain_discrete=struct_pb2.ListValue(values=domain) if k in domains else None))

    def summary(tag, **content):
        data = HParamsPluginData(version=metadata.PLUGIN_DATA_VERSION, **content)
        meta = pb.SummaryMetadata(plugin_data=pb.SummaryMetadata.PluginData(
            plugin_name=metadata.PLUGIN_NAME, content=data.SerializeToString()))
        return pb.Summary(value=[pb.Summary.Value(tag=tag, metadata=meta)])
    experiment = Experiment(hparam_infos=infos, metric_infos=[MetricInfo(name=MetricName(tag=k)) for k in metric_dict])
    return (summary(metadata.EXPERIMENT_TAG, experiment=experiment),
            summary(metadata.SESSION_START_INFO_TAG, session_start_info=start),
            summary(metadata.SESSION_END_INFO_TAG,
                    session_end_info=SessionEndInfo(status=Status.Value("STATUS_SUCCESS"))))
